package h2conn

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// A server that answers requests but never acknowledges PING: the SETTINGS
// probe (peersettings.go) never ends by its ack. A second request on the
// new connection (a provisional slot) must go out once the first request's
// response proves the SETTINGS were processed, or, when no response comes,
// once the probe's time limit (HTTP2Config.PingTimeout) has passed, as
// net/http sends it at once. Before, it waited for the ack until its
// context ended. The own connection needs no PING ack: the server's
// SETTINGS frame settles it.
func TestProvisionalSlotWithoutPingAck(t *testing.T) {
	tests := []struct {
		name string
		// answerFirst: the first request is answered once the second
		// waits; otherwise never, and the probe's time limit is short.
		answerFirst bool
	}{
		{name: "first response settles", answerFirst: true},
		{name: "probe time limit", answerFirst: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			releaseA := make(chan struct{})
			srv := testpeer.StartH2(t, testpeer.H2Script{
				NoPingAck: true,
				OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
					if stream > 0 {
						return testpeer.H2OK(fr, id)
					}
					if !tt.answerFirst {
						return nil
					}
					<-releaseA
					return testpeer.H2OK(fr, id)
				},
			})
			t.Cleanup(func() {
				select {
				case <-releaseA:
				default:
					close(releaseA)
				}
			}) // before the server's cleanup
			// Only the response can let B out when A is answered: the
			// probe's time limit is out of reach of the hang guard.
			cfg := Config{HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}}
			if !tt.answerFirst {
				cfg.HTTP2.PingTimeout = 100 * time.Millisecond
			}
			nc, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewClientConn(nc, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			// Hang guard only: the outcome is asserted, not the time.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			if !c.ReserveStream() {
				t.Fatal("no first stream")
			}
			doneA := make(chan roundTripResult, 1)
			go func() {
				resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/a", nil).WithContext(ctx))
				doneA <- roundTripResult{resp, err}
			}()
			waitFor(t, "request A at the server", func() bool { _, n := srv.Counts(); return n == 1 })
			if !c.ReserveStream() {
				t.Fatal("no second (provisional) stream")
			}
			doneB := make(chan roundTripResult, 1)
			go func() {
				resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/b", nil).WithContext(ctx))
				doneB <- roundTripResult{resp, err}
			}()
			if tt.answerFirst {
				// B waits for the server's SETTINGS to be known
				// (taken its slot, not sent), then A is answered. The
				// own connection knows them from the SETTINGS frame,
				// which this server sends at once: B goes out (the
				// server reads it once A is answered).
				waitFor(t, "request B waiting", func() bool {
					if c.cc == nil {
						return true
					}
					c.mu.Lock()
					defer c.mu.Unlock()
					return c.unstarted == 0 && c.busy == 2
				})
				close(releaseA)
			}
			rb := <-doneB
			if rb.err != nil {
				t.Fatalf("request B: %v, want the server's answer", rb.err)
			}
			if got := readAll(t, rb.resp); got != "ok" {
				t.Fatalf("request B: body %q, want \"ok\"", got)
			}
			if tt.answerFirst {
				ra := <-doneA
				if ra.err != nil {
					t.Fatalf("request A: %v", ra.err)
				}
				readAll(t, ra.resp)
			}
			if conns, streams := srv.Counts(); conns != 1 || streams != 2 {
				t.Fatalf("server saw %d connections and %d requests, want 1 and 2", conns, streams)
			}
			cancel()
			if !tt.answerFirst {
				<-doneA
			}
		})
	}
}
