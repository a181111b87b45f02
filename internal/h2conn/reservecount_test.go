package h2conn

import (
	"testing"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// reserveHeld starts a ReserveStream on c and returns once it is held at
// testHookReserving (the slot counts as busy, nothing is decided yet); it
// goes on when proceed is closed, and its result arrives on got. The
// caller clears the hook once the result has arrived.
func reserveHeld(c *Conn) (proceed chan struct{}, got <-chan bool) {
	entered := make(chan struct{})
	proceed = make(chan struct{})
	c.testHookReserving = func() {
		close(entered)
		<-proceed
	}
	res := make(chan bool, 1)
	go func() { res <- c.ReserveStream() }()
	<-entered
	return proceed, res
}

// TestReleaseDuringReserveKeepsXnetCount: a slot given back (ReleaseStream)
// while another request is in the middle of ReserveStream must give back
// the x/net reservation it holds. ReleaseStream tells a slot backed by an
// x/net reservation from a provisional one by counting (unstarted against
// xres); before the fix ReserveStream counted its slot in unstarted before
// it knew whether x/net granted it, so a release in that window took the
// slot for a provisional one and kept the x/net reservation for good. Each
// such leak costs the connection one of the server's streams: with
// MaxConnsPerHost, requests then waited in the pool for a stream of a
// connection that x/net counted as full (TestH2GoAwayWithQueuedWaiters,
// whose server answers nothing until 10 streams are open, stayed at 9).
//
// The server allows 2 streams and answers every request but the second
// of the connection. The first request learns the server's SETTINGS.
// "granted": B's reservation is granted. "refused": a held request is in
// flight, so with A's reservation x/net is full and B may be refused.
// Either way, once everything is given back, x/net must count no
// reservation and grant what the server allows.
func TestReleaseDuringReserveKeepsXnetCount(t *testing.T) {
	xnetOnly(t)
	const maxStreams = 2
	for _, tt := range []struct {
		name string
		held bool // a request the server does not answer is in flight
	}{
		{name: "granted"},
		{name: "refused", held: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(chan int, 4)
			srv := testpeer.StartH2(t, testpeer.H2Script{
				Settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams}},
				OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
					seen <- stream
					if stream == 1 {
						return nil // held
					}
					return testpeer.H2OK(fr, id)
				},
			})
			c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.OnStreamFree(func() {}) // as the transport sets it with MaxConnsPerHost

			resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/", nil))
			if err != nil {
				t.Fatal(err)
			}
			if b := readAll(t, resp); b != "ok" {
				t.Fatalf("first response %q", b)
			}
			<-seen
			if !c.peerLimitKnown() {
				t.Fatal("the server's SETTINGS are not known after a response")
			}
			heldDone := make(chan roundTripResult, 1)
			if tt.held {
				if !c.ReserveStream() {
					t.Fatal("held request: no stream")
				}
				go func() {
					resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/held", nil))
					heldDone <- roundTripResult{resp, err}
				}()
				<-seen // the server has it
			}

			if !c.ReserveStream() { // A
				t.Fatal("A: no stream")
			}
			proceed, bGot := reserveHeld(c) // B
			c.ReleaseStream()               // A gives its slot back while B is deciding
			close(proceed)
			if <-bGot {
				c.ReleaseStream()
			}
			c.testHookReserving = nil // B has returned: nobody reads it now

			c.mu.Lock()
			unstarted, xres := c.unstarted, c.xres
			c.mu.Unlock()
			if unstarted != 0 || xres != 0 {
				t.Fatalf("after every slot was given back: %d unstarted, %d of them with an x/net reservation; want 0, 0", unstarted, xres)
			}
			// x/net forgets a reservation given back on a goroutine of
			// its own (releaseXnetReservation), and the stream ID it may
			// spend (wrapped x/net counts that stream until the server
			// acknowledges its reset): wait until it counts only the
			// held request.
			held := 0
			if tt.held {
				held = 1
			}
			waitFor(t, "x/net to count only the held request", func() bool {
				st := c.cc.State()
				return st.StreamsReserved == 0 && st.StreamsPending == 0 && st.StreamsActive == held
			})

			free := maxStreams - held
			got := 0
			for range free {
				if c.ReserveStream() {
					got++
				}
			}
			for range got {
				c.ReleaseStream()
			}
			if got != free {
				t.Errorf("%d of %d free streams granted afterwards (x/net: %+v)", got, free, c.cc.State())
			}
			if tt.held {
				c.Close()
				if r := <-heldDone; r.err == nil {
					r.resp.Body.Close()
				}
			}
		})
	}
}
