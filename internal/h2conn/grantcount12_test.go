package h2conn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestReleaseProvisionalKeepsXnetReservation: a provisional slot (granted
// before the server's SETTINGS are known, no hook) holds no x/net
// reservation, so giving it back must leave x/net's count alone: A's
// reservation is still A's. Counting a provisional slot as backed by x/net
// (granted(true)) gave back A's reservation with B's slot, and A's
// RoundTrip then went out on a reservation x/net no longer counted.
func TestReleaseProvisionalKeepsXnetReservation(t *testing.T) {
	srv := testpeer.StartH2(t, testpeer.H2Script{NoPingAck: true})
	// The probe's PING is never acknowledged: the SETTINGS stay unknown.
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.ReserveStream() { // A: x/net's reservation
		t.Fatal("A: no stream")
	}
	if !c.ReserveStream() { // B: provisional
		t.Fatal("B: no provisional stream")
	}
	if c.peerLimitKnown() {
		t.Fatal("the SETTINGS are known: B was not provisional")
	}
	c.ReleaseStream() // B (either slot: the one without a reservation goes)
	// Giving back an x/net reservation is a RoundTrip x/net refuses at
	// once (releaseXnetReservation), synchronous: nothing to wait for.
	if st := c.cc.State(); st.StreamsReserved != 1 {
		t.Fatalf("x/net counts %d reservations after the provisional slot was given back, want 1 (A's)", st.StreamsReserved)
	}
	c.ReleaseStream() // A
}

// TestStrictGrantedWhenFullIsReleased: with strict limits a full
// connection still grants a slot while other streams of ours are in use
// (its RoundTrip waits inside x/net); that slot counts as unstarted like
// any other, so ReleaseStream gives it back. Uncounted, the release did
// nothing and the connection stayed busy for good (never idle, never
// expired or closed by CloseIfIdle).
func TestStrictGrantedWhenFullIsReleased(t *testing.T) {
	arrived, answer := make(chan struct{}, 1), make(chan struct{})
	srv := testpeer.StartH2(t, testpeer.H2Script{
		Settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 1}},
		OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
			if stream == 1 {
				arrived <- struct{}{}
				<-answer
			}
			return testpeer.H2OK(fr, id)
		},
	})
	t.Cleanup(func() {
		select {
		case <-answer:
		default:
			close(answer)
		}
	})
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{StrictMaxConcurrentStreams: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The first response makes the server's limit known.
	resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	done := make(chan roundTripResult, 1)
	if !c.ReserveStream() {
		t.Fatal("A: no stream")
	}
	go func() {
		resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/held", nil))
		done <- roundTripResult{resp, err}
	}()
	<-arrived
	if !c.ReserveStream() { // B: x/net is full; strict grants it
		t.Fatal("B: strict limits refused a slot with a stream of ours in use")
	}
	c.ReleaseStream() // B
	close(answer)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	readAll(t, r.resp)
	if _, idle := c.IdleSince(); !idle {
		c.mu.Lock()
		busy, unstarted := c.busy, c.unstarted
		c.mu.Unlock()
		t.Fatalf("not idle with every slot given back: busy %d, unstarted %d", busy, unstarted)
	}
}

// TestAwaitPeerSettingsNoHookNoWait: without an OnStreamFree hook no slot
// is refused for want of SETTINGS (a second one is provisional), so
// AwaitPeerSettings has nothing to wait for and says so at once, even
// while the probe runs; the ended context shows it did not wait.
func TestAwaitPeerSettingsNoHookNoWait(t *testing.T) {
	srv := testpeer.StartH2(t, testpeer.H2Script{NoPingAck: true})
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.ReserveStream() || !c.ReserveStream() { // the second starts the probe
		t.Fatal("no stream")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waited, err := c.AwaitPeerSettings(ctx); waited || err != nil {
		t.Fatalf("AwaitPeerSettings without a hook: %v, %v; want false, nil", waited, err)
	}
	c.ReleaseStream()
	c.ReleaseStream()
}
