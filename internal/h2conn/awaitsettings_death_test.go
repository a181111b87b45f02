package h2conn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// TestAwaitPeerSettingsEndsAtDeath: AwaitPeerSettings is what a dial's
// leader waits in, holding a MaxConnsPerHost slot, instead of dialling
// another connection; a connection that dies meanwhile will never take
// the stream it waits for, so the wait must end then and the leader dial.
// A wait that outlived the GOAWAY would hold a slot for nothing until
// PingTimeout, where net/http dials a new connection for the request at
// once.
//
// The server never sends its SETTINGS, holds request A (stream 1) and,
// when the test says, sends GOAWAY naming stream 1 (A goes on, no new
// stream); PingTimeout is an hour.
func TestAwaitPeerSettingsEndsAtDeath(t *testing.T) {
	goaway := make(chan struct{})
	arrived := make(chan struct{}, 1)
	onHeaders := func(fr *http2.Framer, id uint32) error {
		arrived <- struct{}{}
		<-goaway
		return fr.WriteGoAway(id, http2.ErrCodeNo, nil)
	}
	// The connection knows the SETTINGS once their frame is read: this
	// server never sends them.
	addr := startNoSettingsServer(t, onHeaders)
	t.Cleanup(func() {
		select {
		case <-goaway:
		default:
			close(goaway)
		}
	})
	c, err := NewClientConn(dialH2(t, addr, false), Config{HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	c.OnStreamFree(func() {})
	aDone := goRoundTrip(c, newRequest(t, "GET", "http://"+addr+"/a", nil))
	<-arrived
	if c.ReserveStream() {
		t.Fatal("a second stream before the server's SETTINGS are known, with a hook")
	}

	awaiting := make(chan struct{})
	c.testHookAwaiting = func() { close(awaiting) }
	// Hang guard only: the wait must end at the death, long before this.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		waited bool
		err    error
	}
	got := make(chan result, 1)
	go func() {
		waited, err := c.AwaitPeerSettings(ctx)
		got <- result{waited, err}
	}()
	<-awaiting
	close(goaway)
	r := <-got
	c.testHookAwaiting = nil // AwaitPeerSettings has returned
	if r.err != nil {
		t.Fatalf("AwaitPeerSettings: %v (still waiting when the hang guard ended)", r.err)
	}
	if c.Usable() {
		t.Fatal("AwaitPeerSettings returned before the GOAWAY made the connection dead")
	}
	c.Close()
	<-aDone
}

// startNoSettingsServer starts a cleartext HTTP/2 server that never sends
// its SETTINGS nor acknowledges a PING, and hands each request's HEADERS
// to onHeaders (an error ends the connection). The test's cleanup closes
// it.
func startNoSettingsServer(t *testing.T, onHeaders func(fr *http2.Framer, id uint32) error) string {
	t.Helper()
	return testpeer.StartH2(t, testpeer.H2Script{
		NoSettings: true,
		NoPingAck:  true,
		OnHeaders: func(_, _ int, fr *http2.Framer, id uint32) error {
			return onHeaders(fr, id)
		},
	}).Addr()
}
