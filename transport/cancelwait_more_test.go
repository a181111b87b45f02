package transport

// More of cancellation while a request waits for its connection (getconn.go):
// what the wait leaves behind, late signals, the dial
// context's values, a proxy's CONNECT, a dialer that panics.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// poolAfterCancelledDial returns impl's transport (MaxConnsPerHost 1) with
// one idle connection in its pool that was dialled for a request cancelled
// (CancelRequest) while its dial was held, and the server it reaches.
// net/http returns from the cancelled request before the dial ends; ferry
// dials on the request's goroutine, so the dial is let go first.
func poolAfterCancelledDial(t *testing.T, impl string) (http.RoundTripper, *gatedServer) {
	t.Helper()
	srv := startGatedServer(t)
	d := newHeldDialer(true, false)
	std := &http.Transport{MaxConnsPerHost: 1, DialContext: d.DialContext}
	var rt http.RoundTripper = std
	if impl == "ferry" {
		rt = From(std)
	}
	req, cancel := withCancelRequest(boundedReq(t, srv.URL+"/first"))
	res := roundTripAsync(rt, req)
	d.waitForDial(t)
	cancel(rt)
	if impl == "ferry" {
		d.finish()
		<-res
	} else {
		<-res
		d.finish()
	}
	return rt, srv
}

// TestGotConnReusedAfterCancelledDial: a connection dialled for a
// request cancelled during its dial goes to the pool (giveBack, marked
// reused) and the next request's GotConn says Reused: true; net/http says
// the same (tryPutIdleConn calls markReused on every connection it pools,
// also one dialled for a request that went away).
func TestGotConnReusedAfterCancelledDial(t *testing.T) {
	var got [2]bool
	for i, impl := range []string{"nethttp", "ferry"} {
		rt, srv := poolAfterCancelledDial(t, impl)
		var reused bool
		next := newReq(t, "GET", srv.URL+"/next", nil)
		next = next.WithContext(httptrace.WithClientTrace(next.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		if o := observe(rt, next); o.Status != 200 {
			t.Fatalf("%s next: %+v", impl, o)
		}
		got[i] = reused
		t.Logf("%s: next request GotConn.Reused=%v", impl, reused)
		closeIdle(rt)
	}
	if got[0] != got[1] {
		t.Errorf("GotConn.Reused on the connection a cancelled dial left: net/http %v, ferry %v", got[0], got[1])
	}
}

// TestDialerPanicLeavesWaitArmed: a DialContext that panics unwinds
// through getConn; the request's CancelRequest entry, its Request.Cancel
// watcher and its MaxConnsPerHost slot are released on the way (dialHeld).
// net/http dials on its own goroutine, where such a panic ends the process;
// ferry's caller can recover it (http.Server recovers handler panics) and
// must find the Transport still working.
func TestDialerPanicLeavesWaitArmed(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	panics := true
	tr := &Transport{MaxConnsPerHost: 1, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if panics {
			panic("test: dialer panics")
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	req := newReq(t, "GET", srv.URL, nil)
	cancelCh := make(chan struct{})
	defer close(cancelCh) // would end a leaked watcher (goleak then passes)
	req.Cancel = cancelCh
	ignore := goleak.IgnoreCurrent()
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("the dialer's panic did not reach the caller")
			}
		}()
		tr.RoundTrip(req)
	}()
	if tr.cancels.Registered(req) {
		t.Errorf("after a recovered dialer panic the request's CancelRequest entry is still linked")
	}
	goleak.VerifyNone(t, ignore) // the Request.Cancel watcher is gone
	// The slot the panicking dial held is free: with MaxConnsPerHost 1 the
	// next request dials instead of waiting forever.
	panics = false
	if o := observe(tr, boundedReq(t, srv.URL)); o.Status != 200 {
		t.Fatalf("request after the panic: %+v", o)
	}
}

type dialValueKey struct{}

// TestDialContextValuesNoDeadline: the context a caller's DialContext
// gets carries the request's values (user values and its httptrace) and,
// as in net/http, not its deadline.
func TestDialContextValuesNoDeadline(t *testing.T) {
	type seen struct {
		Value       any
		Trace       bool
		HasDeadline bool
	}
	var got [2]seen
	for i, impl := range []string{"nethttp", "ferry"} {
		srv := startHandlerServer(t, hello, false, nil)
		var s seen
		std := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			s.Value = ctx.Value(dialValueKey{})
			s.Trace = httptrace.ContextClientTrace(ctx) != nil
			_, s.HasDeadline = ctx.Deadline()
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		var rt http.RoundTripper = std
		if impl == "ferry" {
			rt = From(std)
		}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), dialValueKey{}, "v"), time.Minute)
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {}})
		if o := observe(rt, newReq(t, "GET", srv.URL, nil).WithContext(ctx)); o.Status != 200 {
			t.Fatalf("%s: %+v", impl, o)
		}
		cancel()
		closeIdle(rt)
		got[i] = s
	}
	if got[0] != got[1] {
		t.Errorf("dial context: net/http %+v, ferry %+v", got[0], got[1])
	}
}

// silentProxy accepts connections and reads a CONNECT request, reporting
// it on connected, and never answers.
type silentProxy struct {
	ln        net.Listener
	connected chan struct{}
	mu        sync.Mutex // guards conns
	conns     []net.Conn
}

func startSilentProxy(t *testing.T) *silentProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{ln: ln, connected: make(chan struct{}, 4)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			go func() {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					p.connected <- struct{}{}
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *silentProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// TestCancelDuringProxyConnect: a request cancelled while its proxy
// has not answered CONNECT ends as in net/http, for each signal.
func TestCancelDuringProxyConnect(t *testing.T) {
	for _, c := range []struct {
		name string
		prep func(*http.Request) (*http.Request, func(http.RoundTripper))
	}{
		{"cancel-request", withCancelRequest},
		{"request-cancel", withLegacyCancel},
		{"context-cause", withCancelCause},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got [2]string
			for i, impl := range []string{"nethttp", "ferry"} {
				p := startSilentProxy(t)
				pu, _ := url.Parse("http://" + p.ln.Addr().String())
				std := &http.Transport{Proxy: http.ProxyURL(pu)}
				var rt http.RoundTripper = std
				if impl == "ferry" {
					rt = From(std)
				}
				req, cancel := c.prep(boundedReq(t, "https://127.0.0.1:1/"))
				res := roundTripAsync(rt, req)
				select {
				case <-p.connected:
				case <-time.After(rowTimeout):
					t.Fatal("no CONNECT reached the proxy")
				}
				cancel(rt)
				got[i] = (<-res).Err
				p.close()
				closeIdle(rt)
			}
			if got[0] != got[1] {
				t.Errorf("net/http %q, ferry %q", got[0], got[1])
			}
		})
	}
}

// TestSlotWaitCause: once armed and cancelled by CancelRequest, a
// slotWait is w.ctx for Err and for context.Cause (which finds the cause
// through Value): net/http's "request canceled", not context.Canceled.
func TestSlotWaitCause(t *testing.T) {
	tr := &Transport{}
	req := newReq(t, "GET", "http://127.0.0.1:1/", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sw := &slotWait{Context: ctx, t: tr, req: req}
	done := sw.Done() // arms
	tr.CancelRequest(req)
	<-done
	err, cause, want := sw.Err(), context.Cause(sw), context.Cause(sw.w.ctx)
	if werr := sw.w.end(); !errors.Is(werr, errRequestCanceledConn) {
		t.Errorf("end: %v", werr)
	}
	if err == nil || cause != want {
		t.Errorf("armed slotWait after CancelRequest: Err %v, Cause %v, want Cause %v", err, cause, want)
	}
}

// BenchmarkIdleHitMaxConns: an idle hit with MaxConnsPerHost 0 and 2 (the
// latter takes a slotWait from its sync.Pool); net/http in the same run.
func BenchmarkIdleHitMaxConns(b *testing.B) {
	const response = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	for _, c := range []struct {
		name     string
		maxConns int
		ferry    bool
	}{
		{"ferry/maxconns=0", 0, true},
		{"ferry/maxconns=2", 2, true},
		{"nethttp/maxconns=0", 0, false},
		{"nethttp/maxconns=2", 2, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			dial := func(context.Context, string, string) (net.Conn, error) {
				return newAnsweringConn(response), nil
			}
			var rt http.RoundTripper = &http.Transport{MaxConnsPerHost: c.maxConns, DialContext: dial}
			if c.ferry {
				rt = &Transport{MaxConnsPerHost: c.maxConns, DialContext: dial}
			}
			defer closeIdle(rt)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.ReportAllocs()
			breq, err := http.NewRequestWithContext(ctx, "GET", "http://bench.invalid/", nil)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 16)
			for b.Loop() {
				resp, err := rt.RoundTrip(breq)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.ReadFull(resp.Body, buf[:5]); n != 5 || err != nil || resp.StatusCode != 200 {
					b.Fatalf("bad response %d %q %v", resp.StatusCode, buf[:n], err)
				}
				resp.Body.Read(buf)
				resp.Body.Close()
			}
		})
	}
}

// hiddenCtx hides its context (Value forwards nothing), so context.AfterFunc
// on it cannot register with a parent cancelCtx and runs a goroutine until
// stopped.
type hiddenCtx struct{ context.Context }

func (hiddenCtx) Value(any) any { return nil }

// TestWaitStateReleased: a request that dialled (so armed a
// connWait) and succeeded leaves nothing behind: no CancelRequest entry,
// no Request.Cancel watcher, no AfterFunc goroutine, though its context
// and Request.Cancel are still live when it returns. (The change's tests
// pass with end's unregister, close(legacyDone) or stopCtx removed: every
// request they run closes its Cancel channel or ends its context.)
func TestWaitStateReleased(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	cancelCh := make(chan struct{})
	defer close(cancelCh)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := newReq(t, "GET", srv.URL, nil).WithContext(hiddenCtx{ctx})
	req.Cancel = cancelCh
	// Goroutines before: the server's; the client connection's are gone
	// once CloseIdleConnections closed it.
	ignore := goleak.IgnoreCurrent()
	if o := observe(tr, req); o.Status != 200 {
		t.Fatalf("%+v", o)
	}
	tr.CloseIdleConnections()
	if tr.cancels.Registered(req) {
		t.Errorf("CancelRequest entry still linked after the request returned")
	}
	// goleak retries until the exchange's own goroutines are gone; a
	// leaked watcher or AfterFunc goroutine never ends while cancelCh and
	// ctx are live.
	goleak.VerifyNone(t, ignore)
}

// TestLateCancelAfterEnd: a signal forwarded after end (a
// CancelRequest that found the entry just before unregister, an AfterFunc
// already running) must not cancel the dial context, which the pooled
// connection may be tied to. The change's tests pass without the ended
// flag.
func TestLateCancelAfterEnd(t *testing.T) {
	tr := &Transport{}
	req := newReq(t, "GET", "http://127.0.0.1:1/", nil)
	w := tr.armConnWait(req.Context(), req)
	if err := w.end(); err != nil {
		t.Fatalf("end: %v", err)
	}
	w.cancel(errRequestCanceled)
	if err := w.ctx.Err(); err != nil {
		t.Errorf("dial context cancelled after end: %v", err)
	}
}

// TestH2DialCancelledReleasesStream: an HTTP/2 connection dialled for
// a request cancelled during its dial (the dialer ignores its context)
// stays in the pool with its first stream released, so it is idle and
// serves the next request. The change's tests pass without that release.
func TestH2DialCancelledReleasesStream(t *testing.T) {
	srv := startH2Server(t, h2ServerKind{h2c: true}, static(hello), nil)
	d := newHeldDialer(true, false)
	tr := &Transport{Protocols: protocolsOf("h2c"), DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	defer d.finish()
	req := boundedReq(t, srv.URL+"/first")
	res := roundTripAsync(tr, req)
	d.waitForDial(t)
	tr.CancelRequest(req)
	d.finish()
	if o := <-res; o.Err != "error: net/http: request canceled while waiting for connection" {
		t.Fatalf("first: %+v", o)
	}
	for _, e := range tr.h2.live.snapshot() {
		if c, ok := e.c.(interface{ IdleSince() (time.Time, bool) }); ok {
			if _, idle := c.IdleSince(); !idle {
				t.Errorf("the connection dialled for the cancelled request still has a stream in use")
			}
		}
	}
	if o := observe(tr, newReq(t, "GET", srv.URL+"/next", nil)); o.Status != 200 || o.Proto != "HTTP/2.0" {
		t.Errorf("next: %+v", o)
	}
	if n := srv.connCount(); n != 1 {
		t.Errorf("server accepted %d connections, want 1", n)
	}
}

// TestPooledAfterCancelRetried: the connection a cancelled dial left
// in the pool counts as reused (giveBack), as net/http's tryPutIdleConn
// marks it: a replayable request that finds it closed by the server while
// idle is retried on a new connection instead of failing. (net/http's
// readLoop usually drops such a connection before; either way the request
// succeeds.) The change's tests pass when giveBack does not mark it.
func TestPooledAfterCancelRetried(t *testing.T) {
	var got [2]observation
	for i, impl := range []string{"nethttp", "ferry"} {
		rt, srv := poolAfterCancelledDial(t, impl)
		// The server closes the idle connection, once it tracks it (its
		// accept may trail the client's dial).
		for deadline := time.Now().Add(rowTimeout); srv.connCount() < 1; {
			if time.Now().After(deadline) {
				t.Fatal("the server never accepted the dialled connection")
			}
			time.Sleep(time.Millisecond)
		}
		srv.abort()
		got[i] = observe(rt, newReq(t, "GET", srv.URL+"/next", nil))
		closeIdle(rt)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("next request: net/http %+v, ferry %+v", got[0], got[1])
	}
}
