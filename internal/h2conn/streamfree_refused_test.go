package h2conn

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestStreamFreeRefusedWaiterWoken pins the wakeup of a pool waiter that
// the connection refused because reset streams still count. A server
// allowing 2 streams gets requests A and B. A is cancelled before the
// server sent anything: the connection resets it with a PING and counts
// it until the ack, which the server holds back (it stops reading at A's
// reset). B gets its response head and its body is closed: B is reset too
// and counts until the server has read it. A waiter is refused; once the
// server goes on and acknowledges, it must be called again, or it waits
// for good (a request that hangs with MaxConnsPerHost).
func TestStreamFreeRefusedWaiterWoken(t *testing.T) {
	const maxStreams = 2
	answerB := make(chan struct{})
	ackA := make(chan struct{})
	var idA atomic.Uint32
	sawB := make(chan struct{})
	srv := testpeer.StartH2(t, testpeer.H2Script{
		Settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams}},
		OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
			switch stream {
			case 0:
				idA.Store(id) // A: never answered
			case 1:
				close(sawB)
				<-answerB // B: answered (head only) once A is cancelled
				var buf bytes.Buffer
				hpack.NewEncoder(&buf).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true})
			}
			return nil
		},
		OnReset: func(_ int, id uint32, _ http2.ErrCode) {
			if id == idA.Load() {
				<-ackA // the PING sent with A's reset is read (and acked) after this
			}
		},
	})
	defer func() {
		select {
		case <-ackA:
		default:
			close(ackA)
		}
	}()
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	calls := make(chan struct{}, 64)
	c.OnStreamFree(func() { calls <- struct{}{} })
	waitFor(t, "the server's SETTINGS known", func() bool { return peerSettingsKnown(c) })
	drain := func() {
		for {
			select {
			case <-calls:
			default:
				return
			}
		}
	}
	called := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(5 * time.Second):
			t.Fatal(what)
		}
	}

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	if !c.ReserveStream() || !c.ReserveStream() {
		t.Fatal("no two streams")
	}
	doneA := goRoundTrip(c, newRequest(t, "GET", "http://"+srv.Addr()+"/a", nil).WithContext(ctxA))
	waitFor(t, "A at the server", func() bool { return idA.Load() != 0 })
	gotB := make(chan error, 1)
	var closeB func() error
	go func() {
		resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/b", nil))
		if err == nil {
			closeB = resp.Body.Close
		}
		gotB <- err
	}()
	<-sawB // B's HEADERS sent before A's reset: the connection pings with it only then
	cancelA()
	<-doneA
	close(answerB)
	if err := <-gotB; err != nil {
		t.Fatalf("B: %v", err)
	}
	drain()
	closeB()
	if c.ReserveStream() {
		c.ReleaseStream()
		t.Fatal("a waiter got a stream while the resets of A and B were unconfirmed")
	}
	drain()
	close(ackA)
	called("the resets were confirmed but the refused waiter was never woken")
	if !c.ReserveStream() {
		t.Fatal("the refused waiter, woken, found no stream")
	}
	c.ReleaseStream()
}
