package h2conn

import (
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestRefusedLastSlotKeepsReleaseTime: IdleSince is when the connection
// last had no slot in use, as net/http's idle time runs from the end of the
// connection's last stream; a refused reservation does not move it.
// Kept from before A was taken, the pool would see the connection idle
// for as long as A had been in use and could expire it at once, not
// IdleConnTimeout after its last stream (and GotConn's IdleTime would
// count the busy time).
//
// A is granted (the first slot) and held for a minute on the fake clock;
// B is refused (a second slot before the server's SETTINGS are known, with
// a hook); A is given back. The connection is idle since A's release.
func TestRefusedLastSlotKeepsReleaseTime(t *testing.T) {
	// The server's SETTINGS are held back: they stay unknown.
	unblock := make(chan struct{})
	srv := testpeer.StartH2(t, testpeer.H2Script{BeforeSettings: func() { <-unblock }})
	t.Cleanup(func() { close(unblock) })
	clk := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{Clock: clk.now,
		HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.OnStreamFree(func() {})

	wantIdleSince := func(what string, released time.Time) {
		t.Helper()
		since, idle := c.IdleSince()
		if !idle {
			t.Fatalf("%s: not idle with every slot given back", what)
		}
		if since.Before(released) {
			t.Fatalf("%s: IdleSince %v, %v before A was given back (%v): the connection looks idle for the time A was in use", what, since, released.Sub(since), released)
		}
	}

	clk.advance(time.Minute)
	if !c.ReserveStream() { // A
		t.Fatal("A: no stream")
	}
	clk.advance(time.Minute)
	if c.ReserveStream() { // B
		t.Fatal("B: a second stream before the server's SETTINGS are known, with a hook")
	}
	clk.advance(time.Minute)
	released := clk.now()
	c.ReleaseStream() // A
	clk.advance(time.Second)
	wantIdleSince("B refused while A held", released)
}
