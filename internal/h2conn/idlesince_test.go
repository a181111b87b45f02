package h2conn

import (
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestRefusedLastSlotKeepsReleaseTime: IdleSince is when the connection
// last had no slot in use, as net/http's idle time runs from the end of the
// connection's last stream. A reservation counts as busy while it is
// decided, so a granted slot given back meanwhile leaves the connection
// busy, and the refusal then is what makes it idle. Before the fix a
// refused slot never moved idleSince, so the connection kept the time it
// was last idle before that slot was taken: the pool saw it idle for as
// long as the slot had been in use and could expire it at once, not
// IdleConnTimeout after its last stream (and GotConn's IdleTime counted
// the busy time).
//
// A is granted (the first slot), held for a minute on the fake clock, and
// given back while B is deciding; B is refused (a second slot before the
// server's SETTINGS are known, with a hook). The connection is idle since
// A's release.
func TestRefusedLastSlotKeepsReleaseTime(t *testing.T) {
	srv := testpeer.StartH2(t, testpeer.H2Script{NoPingAck: true})
	clk := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	// The probe's PING is never acknowledged: the SETTINGS stay unknown.
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{Clock: clk.now,
		HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.OnStreamFree(func() {})

	clk.advance(time.Minute)
	if !c.ReserveStream() { // A
		t.Fatal("A: no stream")
	}
	clk.advance(time.Minute)
	released := clk.now()
	proceed, bGot := reserveHeld(c) // B
	c.ReleaseStream()               // A, while B is deciding
	clk.advance(time.Second)
	close(proceed)
	if <-bGot {
		t.Fatal("B: a second stream before the server's SETTINGS are known, with a hook")
	}
	c.testHookReserving = nil // B has returned: nobody reads it now

	since, idle := c.IdleSince()
	if !idle {
		t.Fatal("not idle with every slot given back")
	}
	if since.Before(released) {
		t.Fatalf("IdleSince %v, %v before A was given back (%v): the connection looks idle for the time A was in use", since, released.Sub(since), released)
	}
}
