//go:build !(go1.27 && !http2legacy)

package h2conn

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// Legacy x/net refuses a request that holds a stream reservation with the
// same "client conn not usable" error it gives for a closing connection
// when the connection has become full since the reservation. Two ways to
// get there on a live connection are pinned below; in both the connection
// must stay usable and keep serving (net/http's pool keeps it too), and the
// request must be reported as ReasonStreamLimit, so that a pool makes it
// wait for a stream instead of dropping the connection and dialling
// another (ferry's MaxConnsPerHost test saw three connections where one
// was allowed). Wrapped x/net (Go 1.27) waits for a stream instead of
// refusing, so this file is built for legacy x/net only.

// gatedConn is a real loopback connection whose writes the test can hold:
// x/net writes under its write lock, so a held write keeps x/net inside
// the code that wrote it.
type gatedConn struct {
	net.Conn
	mu      sync.Mutex    // guards held
	held    bool          // writes block until release
	blocked chan struct{} // receives once per write that blocked
	open    chan struct{} // closed by release
	once    sync.Once
}

func newGatedConn(nc net.Conn) *gatedConn {
	return &gatedConn{Conn: nc, blocked: make(chan struct{}, 1), open: make(chan struct{})}
}

func (g *gatedConn) hold() {
	g.mu.Lock()
	g.held = true
	g.mu.Unlock()
}

func (g *gatedConn) release() { g.once.Do(func() { close(g.open) }) }

func (g *gatedConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	if held {
		select {
		case g.blocked <- struct{}{}:
		default:
		}
		<-g.open
	}
	return g.Conn.Write(p)
}

// closeSignalBody is a request body that reports when it is closed.
type closeSignalBody struct {
	io.Reader
	closed chan struct{}
	once   sync.Once
}

func (b *closeSignalBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// startHungRequest starts request A (a GET of /a, which the test's server
// leaves unanswered) on c on a goroutine of its own, and returns once the
// server has seen its seen-th request, A; cancel ends A's context, and A's
// result arrives on done.
func startHungRequest(t *testing.T, c *Conn, srv *testpeer.H2Server, seen int) (cancel context.CancelFunc, done <-chan roundTripResult) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan roundTripResult, 1)
	go func() {
		resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/a", nil).WithContext(ctx))
		res <- roundTripResult{resp, err}
	}()
	waitFor(t, "request A at the server", func() bool { _, n := srv.Counts(); return n == seen })
	return cancel, res
}

// awaitSignal waits for ch, failing the test after a generous bound (it
// asserts that an event happens, not how fast).
func awaitSignal(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestReservedStreamRefusedOnFullConnKeepsConn(t *testing.T) {
	xnetOnly(t)
	tests := []struct {
		name string
		// lowerLimit: the server answers the first request by lowering
		// SETTINGS_MAX_CONCURRENT_STREAMS to 1. Otherwise the first
		// request is cancelled while its RST_STREAM is being written (x/net
		// then counts the stream twice, once as pending reset).
		lowerLimit bool
	}{
		{name: "stream reset by a cancelled request"},
		{name: "server lowered its stream limit", lowerLimit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testpeer.StartH2(t, testpeer.H2Script{
				Settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 2}},
				OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
					if stream > 0 {
						return testpeer.H2OK(fr, id)
					}
					// The first request gets no answer.
					if tt.lowerLimit {
						return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
					}
					return nil
				},
			})
			nc, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			gc := newGatedConn(nc)
			t.Cleanup(gc.release) // runs before the server's cleanup
			c, err := NewClientConn(gc, Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			// Server's SETTINGS known; its last frame before request A.
			c.startProbe()
			<-c.peer.probed
			if !c.peerLimitKnown() {
				t.Fatal("PING probe not acknowledged")
			}

			// A is in flight, B holds x/net's second reservation.
			if !c.ReserveStream() || !c.ReserveStream() {
				t.Fatal("two streams not reserved on a connection allowing 2")
			}
			cancelA, doneA := startHungRequest(t, c, srv, 1)
			defer cancelA()

			if tt.lowerLimit {
				waitFor(t, "the lowered limit applied", func() bool { return c.cc.State().MaxConcurrentStreams == 1 })
			} else {
				// Hold A's RST_STREAM (and its PING) in the write: x/net
				// has counted the pending reset and not yet forgotten
				// the stream.
				gc.hold()
				cancelA()
				awaitSignal(t, "the reset of request A being written", gc.blocked)
			}

			body := &closeSignalBody{Reader: strings.NewReader("payload"), closed: make(chan struct{})}
			doneB := make(chan roundTripResult, 1)
			go func() {
				req := newRequest(t, "POST", "http://"+srv.Addr()+"/b", nil)
				req.Body = body
				req.ContentLength = int64(len("payload"))
				resp, err := c.RoundTrip(req)
				doneB <- roundTripResult{resp, err}
			}()
			// x/net closes the body of the request it refused.
			awaitSignal(t, "x/net refusing request B", body.closed)
			gc.release()
			rb := <-doneB
			if rb.err == nil {
				rb.resp.Body.Close()
				t.Fatal("request B was sent on a full connection")
			}
			var np *NotProcessedError
			if !errors.As(rb.err, &np) || np.Reason != ReasonStreamLimit || !np.BodyUnread {
				t.Fatalf("request B: %v, want a NotProcessedError (stream limit, body unread)", rb.err)
			}
			if !c.Usable() {
				t.Fatal("a live connection that was only full is no longer usable")
			}

			cancelA()
			if ra := <-doneA; !errors.Is(ra.err, context.Canceled) {
				if ra.err == nil {
					ra.resp.Body.Close()
				}
				t.Fatalf("request A: %v, want context.Canceled", ra.err)
			}
			serveAnotherOn(t, c, srv.Addr())
			if conns, _ := srv.Counts(); conns != 1 {
				t.Fatalf("server saw %d connections, want 1", conns)
			}
		})
	}
}

// TestRefusalJudgedWithoutWaitingForStuckWrite: the refusal of a reserved
// stream is caused by another stream's RST_STREAM (and PING) being written;
// when that write is stuck (a peer that does not read, no
// WriteByteTimeout), the refused request must not wait for x/net's write
// lock to ask whether the connection is closing (legacy x/net's State
// takes it). x/net itself keeps the refused request until the write ends
// or its context does (its stream cleanup takes the write lock too), so
// the request's context is cancelled: RoundTrip must then return, and
// report the refusal (before, it stayed blocked in State).
func TestRefusalJudgedWithoutWaitingForStuckWrite(t *testing.T) {
	xnetOnly(t)
	srv := testpeer.StartH2(t, testpeer.H2Script{
		Settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 2}},
		OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
			if stream > 0 {
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
	t.Cleanup(gc.release)
	c, err := NewClientConn(gc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.startProbe()
	<-c.peer.probed
	if !c.ReserveStream() || !c.ReserveStream() {
		t.Fatal("two streams not reserved on a connection allowing 2")
	}
	cancelA, doneA := startHungRequest(t, c, srv, 1)
	defer cancelA()
	gc.hold()
	cancelA()
	awaitSignal(t, "the reset of request A being written", gc.blocked)

	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	body := &closeSignalBody{Reader: strings.NewReader("payload"), closed: make(chan struct{})}
	doneB := make(chan roundTripResult, 1)
	go func() {
		req := newRequest(t, "POST", "http://"+srv.Addr()+"/b", nil).WithContext(ctxB)
		req.Body = body
		req.ContentLength = int64(len("payload"))
		resp, err := c.RoundTrip(req)
		doneB <- roundTripResult{resp, err}
	}()
	awaitSignal(t, "x/net refusing request B", body.closed)
	cancelB()
	var rb roundTripResult
	select {
	case rb = <-doneB:
	case <-time.After(10 * time.Second):
		gc.release()
		<-doneB
		t.Fatal("request B, refused by x/net and cancelled, stayed inside RoundTrip while another stream's write was stuck")
	}
	// x/net sees the refusal and the cancellation both ready: either error.
	var np *NotProcessedError
	refused := errors.As(rb.err, &np) && np.Reason == ReasonStreamLimit && np.BodyUnread
	if !refused && !errors.Is(rb.err, context.Canceled) {
		t.Fatalf("request B: %v, want a NotProcessedError (stream limit, body unread) or context.Canceled", rb.err)
	}
	if !c.Usable() {
		t.Fatal("a live connection whose write is only slow is no longer usable")
	}
	gc.release()
	if ra := <-doneA; ra.err == nil {
		ra.resp.Body.Close()
		t.Fatal("request A answered")
	}
	// The check on the side, once the write went through, keeps the
	// connection: it serves another request.
	serveAnotherOn(t, c, srv.Addr())
}

// serveAnotherOn waits until c has room, then sends request C on it and
// checks its answer: the connection is still serving.
func serveAnotherOn(t *testing.T, c *Conn, addr string) {
	t.Helper()
	waitFor(t, "a free stream", c.cc.CanTakeNewRequest)
	if !c.ReserveStream() {
		t.Fatal("no stream reserved on the connection once it had room")
	}
	resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+addr+"/c", nil))
	if err != nil {
		t.Fatalf("request C on the same connection: %v", err)
	}
	if got := readAll(t, resp); got != "ok" {
		t.Fatalf("request C: body %q, want \"ok\"", got)
	}
}
