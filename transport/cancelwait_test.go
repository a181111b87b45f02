package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"sync"
	"testing"
	"time"
)

// A request's cancellation signals (its context, the legacy Request.Cancel
// channel and the deprecated CancelRequest) reach it while it waits for a
// connection: queued for a MaxConnsPerHost slot, dialling, or waiting for
// another request's HTTP/2 dial. Each row runs against net/http.Transport
// and against ferry (From of the same configuration), each with its own
// loopback server and dialer, and compares what the client observed and
// how many connections the server accepted.

// heldDialer is a DialContext hook that holds every dial until release is
// closed (reporting each on dialing), then dials the loopback server for
// real, or fails when failHeld is set. A held dial returns early when its
// context ends unless ignoreCtx is set, like a dialer that does not look
// at its context.
type heldDialer struct {
	ignoreCtx bool
	failHeld  bool
	dialing   chan struct{} // one send per held dial, as it starts
	release   chan struct{} // closed to let held dials go on
	held      sync.WaitGroup
}

func newHeldDialer(ignoreCtx, failHeld bool) *heldDialer {
	return &heldDialer{ignoreCtx: ignoreCtx, failHeld: failHeld,
		dialing: make(chan struct{}, 16), release: make(chan struct{})}
}

func (d *heldDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	select {
	case <-d.release:
	default:
		d.held.Add(1)
		defer d.held.Done()
		d.dialing <- struct{}{}
		var done <-chan struct{}
		if !d.ignoreCtx {
			done = ctx.Done()
		}
		select {
		case <-d.release:
		case <-done:
			return nil, ctx.Err()
		}
		if d.failHeld {
			return nil, errors.New("held dial released")
		}
	}
	return (&net.Dialer{}).DialContext(context.WithoutCancel(ctx), network, addr)
}

// waitForDial blocks until a held dial started.
func (d *heldDialer) waitForDial(t *testing.T) {
	t.Helper()
	select {
	case <-d.dialing:
	case <-time.After(rowTimeout):
		t.Fatal("no dial started")
	}
}

// finish lets every held dial go on and waits for them to return.
func (d *heldDialer) finish() {
	select {
	case <-d.release:
	default:
		close(d.release)
	}
	d.held.Wait()
}

// gatedServer is a loopback HTTP/1.1 server whose /slow requests report on
// arrived and wait for gate; every other path answers at once.
type gatedServer struct {
	*testServer
	arrived chan struct{}
	gate    chan struct{}
}

func startGatedServer(t *testing.T) *gatedServer {
	s := &gatedServer{arrived: make(chan struct{}, 16), gate: make(chan struct{})}
	s.testServer = startHandlerServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			s.arrived <- struct{}{}
			<-s.gate
		}
		hello(w, r)
	}, false, nil)
	t.Cleanup(s.open) // before the server's Close, which waits for handlers
	return s
}

// open lets /slow requests answer.
func (s *gatedServer) open() {
	select {
	case <-s.gate:
	default:
		close(s.gate)
	}
}

// holdSlot starts a /slow request and waits until the server has it, so
// the request holds its connection (with MaxConnsPerHost 1, the only
// slot). The returned function lets it answer and returns what it saw.
func holdSlot(t *testing.T, rt http.RoundTripper, srv *gatedServer) func() observation {
	t.Helper()
	res := make(chan observation, 1)
	go func() { res <- observe(rt, newReq(t, "GET", srv.URL+"/slow", nil)) }()
	select {
	case <-srv.arrived:
	case <-time.After(rowTimeout):
		t.Fatal("the slot holder never reached the server")
	}
	return func() observation {
		srv.open()
		return <-res
	}
}

// roundTripAsync runs req on its own goroutine.
func roundTripAsync(rt http.RoundTripper, req *http.Request) <-chan observation {
	res := make(chan observation, 1)
	go func() { res <- observe(rt, req) }()
	return res
}

// cancelUntilDone calls CancelRequest for req until its RoundTrip returns.
// CancelRequest is a one-shot call: made before the request registered, it
// is lost in both transports, and from outside nothing tells when a request
// queued in a pool has registered. The row's result does not depend on how
// many calls it took.
func cancelUntilDone(rt http.RoundTripper, req *http.Request, res <-chan observation) observation {
	for {
		rt.(requestCanceler).CancelRequest(req)
		select {
		case o := <-res:
			return o
		case <-time.After(time.Millisecond):
		}
	}
}

// onGetConn returns req with a trace whose GetConn hook runs f: the
// request is then inside its transport's connection wait.
func onGetConn(req *http.Request, f func()) *http.Request {
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GetConn: func(string) { f() },
	}))
}

var errTestCause = errors.New("test cause")

// waitRow is one scenario. impl is "nethttp" or "ferry": where ferry dials
// on the request's goroutine, a request whose dialer ignores its context
// cannot return before the dialer does (net/http's returns at once and the
// dial goes on behind it), so such rows release the dial at different
// points; what either side then observes is the same.
type waitRow struct {
	name     string
	maxConns int
	dialer   func() *heldDialer // nil: no DialContext hook
	run      func(t *testing.T, impl string, rt http.RoundTripper, srv *gatedServer, d *heldDialer) []any
}

// thenGet appends a plain GET, which must reuse the connection the row
// left in the pool.
func thenGet(t *testing.T, rt http.RoundTripper, srv *gatedServer, obs ...any) []any {
	return append(obs, observe(rt, newReq(t, "GET", srv.URL+"/next", nil)))
}

// cancelDuringDial is a row body: a request whose held dial is interrupted
// by cancel (given the request and called once its dial started), then,
// once the dial is released, a GET that finds the connection the cancelled
// request left behind, if any.
func cancelDuringDial(prep func(*http.Request) (*http.Request, func(rt http.RoundTripper))) func(t *testing.T, impl string, rt http.RoundTripper, srv *gatedServer, d *heldDialer) []any {
	return func(t *testing.T, impl string, rt http.RoundTripper, srv *gatedServer, d *heldDialer) []any {
		req, cancel := prep(boundedReq(t, srv.URL+"/first"))
		res := roundTripAsync(rt, req)
		d.waitForDial(t)
		cancel(rt)
		var first observation
		if d.ignoreCtx && impl == "ferry" {
			d.finish() // ferry returns when the dialer does
			first = <-res
		} else {
			first = <-res // net/http returns at once; ferry's dial saw its context end
			d.finish()
		}
		return thenGet(t, rt, srv, first)
	}
}

func withLegacyCancel(req *http.Request) (*http.Request, func(http.RoundTripper)) {
	ch := make(chan struct{})
	req.Cancel = ch
	return req, func(http.RoundTripper) { close(ch) }
}

func withCancelRequest(req *http.Request) (*http.Request, func(http.RoundTripper)) {
	return req, func(rt http.RoundTripper) { rt.(requestCanceler).CancelRequest(req) }
}

func withCancelCause(req *http.Request) (*http.Request, func(http.RoundTripper)) {
	ctx, cancel := context.WithCancelCause(req.Context())
	return req.WithContext(ctx), func(http.RoundTripper) { cancel(errTestCause) }
}

var waitRows = []waitRow{
	// Queued for a MaxConnsPerHost slot behind a request that holds it.
	{name: "slot/cancel-request", maxConns: 1, run: func(t *testing.T, impl string, rt http.RoundTripper, srv *gatedServer, d *heldDialer) []any {
		done := holdSlot(t, rt, srv)
		req := boundedReq(t, srv.URL+"/queued")
		queued := cancelUntilDone(rt, req, roundTripAsync(rt, req))
		return thenGet(t, rt, srv, queued, done())
	}},
	{name: "slot/request-cancel", maxConns: 1, run: func(t *testing.T, impl string, rt http.RoundTripper, srv *gatedServer, d *heldDialer) []any {
		done := holdSlot(t, rt, srv)
		req := boundedReq(t, srv.URL+"/queued")
		ch := make(chan struct{})
		req.Cancel = ch
		queued := observe(rt, onGetConn(req, func() { close(ch) }))
		return thenGet(t, rt, srv, queued, done())
	}},
	{name: "slot/context-cause", maxConns: 1, run: func(t *testing.T, impl string, rt http.RoundTripper, srv *gatedServer, d *heldDialer) []any {
		done := holdSlot(t, rt, srv)
		ctx, cancel := context.WithCancelCause(context.Background())
		req := newReq(t, "GET", srv.URL+"/queued", nil).WithContext(ctx)
		queued := observe(rt, onGetConn(req, func() { cancel(errTestCause) }))
		return thenGet(t, rt, srv, queued, done())
	}},
	// Dialling, with a dialer that stops when its context ends.
	{name: "dial/request-cancel", dialer: func() *heldDialer { return newHeldDialer(false, true) },
		run: cancelDuringDial(withLegacyCancel)},
	{name: "dial/cancel-request", dialer: func() *heldDialer { return newHeldDialer(false, true) },
		run: cancelDuringDial(withCancelRequest)},
	{name: "dial/context-cause", dialer: func() *heldDialer { return newHeldDialer(false, true) },
		run: cancelDuringDial(withCancelCause)},
	// Dialling, with a dialer that ignores its context and succeeds: the
	// request still ends cancelled and its connection is pooled for the
	// next request (MaxConnsPerHost 1 makes net/http's next request wait
	// for it rather than dial its own while the first dial finishes).
	{name: "dial-ignoring-context/cancel-request", maxConns: 1, dialer: func() *heldDialer { return newHeldDialer(true, false) },
		run: cancelDuringDial(withCancelRequest)},
	{name: "dial-ignoring-context/request-cancel", maxConns: 1, dialer: func() *heldDialer { return newHeldDialer(true, false) },
		run: cancelDuringDial(withLegacyCancel)},
	{name: "dial-ignoring-context/context-cause", maxConns: 1, dialer: func() *heldDialer { return newHeldDialer(true, false) },
		run: cancelDuringDial(withCancelCause)},
}

func TestCancelWhileWaitingForConn(t *testing.T) {
	for _, row := range waitRows {
		t.Run(row.name, func(t *testing.T) {
			type result struct {
				Obs   []any
				Conns int
			}
			var res [2]result
			for i, impl := range []string{"nethttp", "ferry"} {
				srv := startGatedServer(t)
				std := &http.Transport{MaxConnsPerHost: row.maxConns}
				var d *heldDialer
				if row.dialer != nil {
					d = row.dialer()
					std.DialContext = d.DialContext
				}
				var rt http.RoundTripper = std
				if impl == "ferry" {
					rt = From(std)
				}
				res[i].Obs = row.run(t, impl, rt, srv, d)
				if d != nil {
					d.finish()
				}
				closeIdle(rt)
				res[i].Conns = srv.connCount()
			}
			if !reflect.DeepEqual(res[0], res[1]) {
				t.Errorf("results differ\nnet/http: %+v\nferry:    %+v", res[0], res[1])
			}
		})
	}
}

// TestCancelRequestReachesH2Follower: a request waiting for another
// request's dial to an origin that may speak HTTP/2 (ferry coalesces first
// dials; net/http dials once per request, so this row has no net/http
// twin) ends on CancelRequest with net/http's error for a request cancelled
// while waiting for its connection; the dial it waited for goes on and
// serves the next request.
func TestCancelRequestReachesH2Follower(t *testing.T) {
	srv := startH2Server(t, h2ServerKind{h2c: true}, static(hello), nil)
	d := newHeldDialer(false, false)
	tr := &Transport{Protocols: protocolsOf("h2c"), DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	defer d.finish()

	leader := roundTripAsync(tr, newReq(t, "GET", srv.URL+"/leader", nil))
	d.waitForDial(t)
	req := boundedReq(t, srv.URL+"/follower")
	follower := cancelUntilDone(tr, req, roundTripAsync(tr, req))
	d.finish()
	if want := "error: net/http: request canceled while waiting for connection"; follower.Err != want {
		t.Errorf("follower: %+v, want error %q", follower, want)
	}
	if o := <-leader; o.Status != 200 || o.Proto != "HTTP/2.0" {
		t.Errorf("leader: %+v", o)
	}
	if o := observe(tr, newReq(t, "GET", srv.URL+"/next", nil)); o.Status != 200 || o.Proto != "HTTP/2.0" {
		t.Errorf("next: %+v", o)
	}
	if n := srv.connCount(); n != 1 {
		t.Errorf("server accepted %d connections, want 1", n)
	}
}

// TestIdleHitArmsNoWait: only a request that may wait or dials pays for
// carrying its cancellation signals there. A request that finds an idle
// connection costs the same allocations with MaxConnsPerHost set (where
// ferry takes the idle connection without waiting before it arms anything)
// as without, also with a cancellable context, and arms no connection wait
// (waitsArmed). (Not with Request.Cancel:
// the goroutine that watches it during the exchange allocates or not
// depending on the runtime's free list, which makes the count unstable.)
func TestIdleHitArmsNoWait(t *testing.T) {
	const response = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	allocs := func(maxConns int) float64 {
		dials := 0
		tr := &Transport{MaxConnsPerHost: maxConns, DialContext: func(context.Context, string, string) (net.Conn, error) {
			dials++
			return newAnsweringConn(response), nil
		}}
		defer tr.CloseIdleConnections()
		req := newReq(t, "GET", "http://inmem.invalid/", nil).WithContext(ctx)
		buf := make([]byte, 16)
		do := func() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := io.ReadFull(resp.Body, buf[:5]); n != 5 || err != nil {
				t.Fatalf("body: %q %v", buf[:n], err)
			}
			resp.Body.Read(buf)
			resp.Body.Close()
		}
		do() // dials
		armed := tr.waitsArmed.Load()
		a := testing.AllocsPerRun(100, do)
		if dials != 1 {
			t.Fatalf("MaxConnsPerHost %d: %d dials, want 1", maxConns, dials)
		}
		if n := tr.waitsArmed.Load() - armed; n != 0 {
			t.Fatalf("MaxConnsPerHost %d: %d idle hits armed a connection wait", maxConns, n)
		}
		return a
	}
	if without, with := allocs(0), allocs(2); with != without {
		t.Fatalf("allocations per request on an idle connection: %.1f with MaxConnsPerHost, %.1f without", with, without)
	}
}
