//go:build !(go1.27 && !http2legacy)

package h2conn

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// TestFullConnGivenUpWhileResetWriteStuck: a connection allowing one stream
// whose cancelled request's RST_STREAM+PING write is stuck (the peer stopped
// reading) is full with none of ferry's slots in use. A request that finds
// it so asks the checker to ping it; the PING cannot be acknowledged, so
// after PingTimeout the connection must be given up and the OnStreamFree
// hook told (a MaxConnsPerHost waiter then dials). The checker first asks
// x/net's State, which waits for the stuck write lock, so it never gets to
// the PING.
func TestFullConnGivenUpWhileResetWriteStuck(t *testing.T) {
	xnetOnly(t)
	srv := testpeer.StartH2(t, testpeer.H2Script{
		Settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 1}},
		OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
			if stream == 0 {
				return testpeer.H2OK(fr, id)
			}
			return nil // request A gets no answer
		},
	})
	nc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	gc := newGatedConn(nc)
	t.Cleanup(gc.release) // runs after c.Close below
	c, err := NewClientConn(gc, Config{HTTP2: &http.HTTP2Config{PingTimeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var woken atomic.Int32
	c.OnStreamFree(func() { woken.Add(1) })
	<-c.peer.probed
	resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/warm", nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)

	cancelA, doneA := startHungRequest(t, c, srv, 2)
	gc.hold()
	cancelA()
	awaitSignal(t, "the reset of request A being written", gc.blocked)
	if ra := <-doneA; ra.err == nil {
		t.Fatal("request A answered")
	}
	if c.ReserveStream() {
		t.Fatal("a stream reserved on a connection x/net counts as full")
	}
	before := woken.Load()
	waitFor(t, "the connection given up after PingTimeout", func() bool { return !c.Usable() && woken.Load() > before })
}
