//go:build !(go1.27 && !http2legacy)

package h2conn

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// countingWatch wraps a deathWatch and counts the connections it hands to
// x/net's pool path: every ask after the first is x/net retrying the
// marker request.
type countingWatch struct {
	w       deathWatch
	handed  atomic.Int32
	retried chan struct{} // closed at the second hand-over
	once    sync.Once
}

func (cw *countingWatch) GetClientConn(req *http.Request, addr string) (*http2.ClientConn, error) {
	cc, err := cw.w.GetClientConn(req, addr)
	if err == nil && cw.handed.Add(1) == 2 {
		cw.once.Do(func() { close(cw.retried) })
	}
	return cc, err
}

func (cw *countingWatch) MarkDead(cc *http2.ClientConn) { cw.w.MarkDead(cc) }

// serveZeroStreams starts a cleartext HTTP/2 server whose SETTINGS allow
// no concurrent stream (RFC 9113 section 6.5.2 lets a server say 0); it acks
// SETTINGS and PINGs and nothing else.
func serveZeroStreams(t *testing.T) *testpeer.H2Server {
	t.Helper()
	return testpeer.StartH2(t, testpeer.H2Script{
		Settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 0}},
	})
}

// TestMarkInUseAfterPeerSettings: the marker request of markInUse must end
// at once, also when x/net has already processed SETTINGS that leave no
// room for a stream (x/net's reader races the marker in NewClientConn; the
// test lets the reader win). Before the fix x/net's pool path retried the
// "unusable" marker with 1, 2, 4... 32 s backoff (about a minute inside
// NewClientConn, deaf to the request's context), and with strict limits
// the marker waited for a free stream forever.
func TestMarkInUseAfterPeerSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{}},
		{"strict", Config{StrictMaxConcurrentStreams: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serveZeroStreams(t)
			var cw *countingWatch
			c, t2 := newWatchedConn(t, srv.Addr(), tc.cfg, func(c *Conn) http2.ClientConnPool {
				cw = &countingWatch{w: deathWatch{c}, retried: make(chan struct{})}
				return cw
			})
			cc := c.cc
			// The ack comes after the server's SETTINGS: once it is in,
			// x/net knows the limit is 0.
			if err := cc.Ping(context.Background()); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				markInUse(t2, false)
			}()
			for {
				select {
				case <-done:
					return
				case <-cw.retried:
					t.Error("x/net retried the in-use marker (backoff of up to a minute)")
					cc.Close()
					<-done
					return
				default:
				}
				if cc.State().StreamsPending > 0 {
					t.Error("the in-use marker waits inside x/net for a free stream")
					cc.Close()
					<-done
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}
