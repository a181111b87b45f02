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

// A second request on a new connection (a provisional slot) waits for the
// server's SETTINGS and then goes out on the connection; when they never
// come it goes out once HTTP2Config.PingTimeout has passed, as net/http
// sends it at once, not when its context ends.
func TestProvisionalSlotWithoutPingAck(t *testing.T) {
	tests := []struct {
		name string
		// settingsLate: the server sends its SETTINGS once B waits;
		// otherwise never, and PingTimeout is short.
		settingsLate bool
	}{
		{name: "settings late", settingsLate: true},
		{name: "settings never", settingsLate: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addr string
			cfg := Config{HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}}
			var releaseSettings chan struct{}
			var sawA chan struct{} // closed when the server read A (settings never)
			answer := func(fr *http2.Framer, id uint32, stream int) error {
				if stream == 0 && !tt.settingsLate {
					return nil // A is never answered
				}
				return testpeer.H2OK(fr, id)
			}
			if tt.settingsLate {
				releaseSettings = make(chan struct{})
				srv := testpeer.StartH2(t, testpeer.H2Script{
					BeforeSettings: func() { <-releaseSettings },
					OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
						return answer(fr, id, stream)
					},
				})
				t.Cleanup(func() {
					select {
					case <-releaseSettings:
					default:
						close(releaseSettings)
					}
				}) // before the server's cleanup
				addr = srv.Addr()
			} else {
				cfg.HTTP2.PingTimeout = 100 * time.Millisecond
				n := 0
				sawA = make(chan struct{})
				addr = startNoSettingsServer(t, func(fr *http2.Framer, id uint32) error {
					n++
					if n == 1 {
						close(sawA)
					}
					return answer(fr, id, n-1)
				})
			}
			nc, err := net.Dial("tcp", addr)
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
				resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+addr+"/a", nil).WithContext(ctx))
				doneA <- roundTripResult{resp, err}
			}()
			if sawA != nil {
				<-sawA // A is the connection's first stream, B the second
			}
			if !c.ReserveStream() {
				t.Fatal("no second (provisional) stream")
			}
			if peerSettingsKnown(c) {
				t.Fatal("the server's SETTINGS are known before it sent them")
			}
			doneB := make(chan roundTripResult, 1)
			go func() {
				resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+addr+"/b", nil).WithContext(ctx))
				doneB <- roundTripResult{resp, err}
			}()
			if tt.settingsLate {
				close(releaseSettings)
			}
			rb := <-doneB
			if rb.err != nil {
				t.Fatalf("request B: %v, want the server's answer", rb.err)
			}
			if got := readAll(t, rb.resp); got != "ok" {
				t.Fatalf("request B: body %q, want \"ok\"", got)
			}
			if tt.settingsLate {
				ra := <-doneA
				if ra.err != nil {
					t.Fatalf("request A: %v", ra.err)
				}
				readAll(t, ra.resp)
			}
			cancel()
			if !tt.settingsLate {
				<-doneA
			}
		})
	}
}
