package transport

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"go/version"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/gzipbody"
	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
	"go.uber.org/goleak"
)

// Early Close of an HTTP/1.1 response body. The toolchain decides what
// happens (drain.go): Go 1.26's net/http closes the connection, Go 1.27's
// drains a body of at most 256 KiB (or unknown length) for up to 50 ms and
// keeps the connection when that reaches the end. These tests assert the
// behaviour of the toolchain running them, which they learn from
// runtime.Version (not from drainOnEarlyClose, so the build-tag files are
// checked too). CI runs them on both toolchains (-run EarlyClose).
//
// Each test waits until the first connection has settled, deterministically:
// either the PutIdleConn hook fired (the connection is in the pool) or the
// scripted server saw the connection close. Rows that must reach the end of
// the body open a drain window of a minute (Transport.drainTime) so a loaded
// machine cannot turn them into timeouts; rows about a stalled server use
// the real 50 ms window. The differential suite (diff_test.go) compares the
// real window with net/http's.

// toolchainDrains: the Go release running the tests drains early-closed
// bodies (1.27 and later).
var toolchainDrains = version.Compare(version.Lang(runtime.Version()), "go1.27") >= 0

// Response builders for the scripted servers.

func lengthResponse(n int) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", n, strings.Repeat("x", n))
}

// noisyGzip is the gzip encoding of raw bytes of pseudo-random data (fixed
// seed), which does not compress: the encoding is a little over raw bytes.
func noisyGzip(raw int) []byte {
	data := make([]byte, raw)
	rand.NewChaCha8([32]byte{}).Read(data)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	zw.Close()
	return buf.Bytes()
}

func gzipResponse(body []byte) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// send returns a first answer that writes resp whole.
func send(resp string) func(c *rawConn) {
	return func(c *rawConn) { io.WriteString(c, resp) }
}

// earlyCloseScript answers the first request of the first connection with
// first, and every other request with a 2-byte "ok". A first answer that
// stalls simply returns: the script then waits for the next request, which
// never comes, until the client closes the connection.
func earlyCloseScript(first func(c *rawConn)) func(c *rawConn) {
	return func(c *rawConn) {
		for i := 0; ; i++ {
			if _, err := c.readRequest(); err != nil {
				return
			}
			if c.n == 0 && i == 0 {
				first(c)
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	}
}

// earlyCloseRequest is the first request of an early-close test, traced so
// that settle can tell when its connection went back to the pool.
type earlyCloseRequest struct {
	putIdle chan error // PutIdleConn's argument
	cancel  context.CancelFunc
	req     *http.Request
}

func newEarlyCloseRequest(t *testing.T, url string) *earlyCloseRequest {
	e := &earlyCloseRequest{putIdle: make(chan error, 1)}
	trace := &httptrace.ClientTrace{PutIdleConn: func(err error) { e.putIdle <- err }}
	var ctx context.Context
	ctx, e.cancel = context.WithCancel(httptrace.WithClientTrace(context.Background(), trace))
	t.Cleanup(e.cancel)
	e.req = newReq(t, "GET", url, nil).WithContext(ctx)
	return e
}

// send makes the request with rt; it must get a response.
func (e *earlyCloseRequest) send(t *testing.T, rt http.RoundTripper) *http.Response {
	t.Helper()
	resp, err := rt.RoundTrip(e.req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// closeEarly reads n bytes of resp's body, closes it, ends the request's
// context (the usual order of deferred calls: Close, then cancel) and checks
// that the body then reads as closed.
func closeEarly(t *testing.T, e *earlyCloseRequest, resp *http.Response, n int) {
	t.Helper()
	if _, err := io.ReadFull(resp.Body, make([]byte, n)); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.cancel()
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil || err.Error() != gzipbody.ErrReadAfterClose.Error() {
		t.Fatalf("Read after Close: %v, want %v", err, gzipbody.ErrReadAfterClose)
	}
}

// settle waits until the first connection of srv has settled: back in the
// pool (PutIdleConn fired; kept is true) or closed (the server saw the close).
// A connection that does neither within a generous bound fails the test: a
// drain never outlives its window.
func (e *earlyCloseRequest) settle(t *testing.T, srv *testServer) (kept bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-e.putIdle:
			if err == nil {
				return true
			}
			// After CloseIdleConnections the connection is refused (and
			// then closed), with net/http's error.
			if err != errCloseIdle {
				t.Fatalf("PutIdleConn(%v)", err)
			}
		default:
		}
		if srv.liveCount() == 0 {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatal("the early-closed connection was neither pooled nor closed")
		}
		time.Sleep(time.Millisecond)
	}
}

// checkSettled checks ferry's view once the first connection settled: the
// pool and the counters agree with kept, and the next request reuses the
// connection exactly when it was kept.
func checkSettled(t *testing.T, tr *Transport, srv *testServer, kept bool) {
	t.Helper()
	wantIdle := 0
	if kept {
		wantIdle = 1
	}
	// The server can see a closed connection before the closing goroutine
	// has counted it down: wait for the counts to settle, then check them.
	st := tr.Stats()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); st = tr.Stats() {
		if st.Conns.IdleH1 == wantIdle && (!countStats || st.Conns.OpenH1 == wantIdle) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if st.Conns.IdleH1 != wantIdle {
		t.Errorf("IdleH1 = %d, want %d", st.Conns.IdleH1, wantIdle)
	}
	if countStats && st.Conns.OpenH1 != wantIdle {
		t.Errorf("OpenH1 = %d, want %d (no connection in use)", st.Conns.OpenH1, wantIdle)
	}
	var reused, gotConn bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { gotConn, reused = true, i.Reused }}
	req := newReq(t, "GET", srv.URL, nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("next request: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "ok" {
		t.Fatalf("next request: body %q, %v", body, err)
	}
	if !gotConn || reused != kept {
		t.Errorf("next request: GotConn %v, Reused = %v, want %v", gotConn, reused, kept)
	}
	if st := tr.Stats(); st.Pool.Hits != uint64(wantIdle) {
		t.Errorf("Pool.Hits = %d, want %d", st.Pool.Hits, wantIdle)
	}
}

// wantKept is whether the toolchain keeps a connection that Go 1.27 would.
func wantKept(keepsOn127 bool) bool { return toolchainDrains && keepsOn127 }

type earlyCloseCase struct {
	name  string
	first func(c *rawConn) // the first answer
	read  int              // body bytes read before Close
	// keeps: on Go 1.27 the connection goes back to the pool.
	keeps bool
	// realWindow uses the 50 ms window (a stalled server); other rows get a
	// minute, so that reaching the end never depends on the machine's load.
	realWindow bool
	gzip       bool                // transparent gzip (DisableCompression off)
	set        func(*Transport)    // more settings
	mod        func(*http.Request) // changes to the first request
	check      func(t *testing.T, resp *http.Response)
}

var (
	gzip300k = noisyGzip(300 << 10)
	gzip64k  = noisyGzip(64 << 10)
	gzip600k = noisyGzip(600 << 10)
)

var earlyCloseCases = []earlyCloseCase{
	{name: "length-100k", first: send(lengthResponse(100000)), read: 10, keeps: true},
	{name: "length-buffered", first: send(lengthResponse(1000)), read: 10, keeps: true},
	{name: "length-256k-exactly", first: send(lengthResponse(256 << 10)), read: 1, keeps: true},
	{name: "length-256k-plus-1", first: send(lengthResponse(256<<10 + 1)), read: 1},
	// The limit is on resp.ContentLength, not on what is left.
	{name: "length-300k-mostly-read", first: send(lengthResponse(300 << 10)), read: 290 << 10},
	{name: "chunked-trailer", first: send(testpeer.ChunkedResponse(120000, 30000, true)), read: 10, keeps: true,
		check: func(t *testing.T, resp *http.Response) {
			// The trailer read by the drain is discarded, as net/http does:
			// the Response is the caller's once Close returned.
			if want := (http.Header{"X-T": nil}); fmt.Sprint(resp.Trailer) != fmt.Sprint(want) {
				t.Errorf("Trailer = %v, want %v", resp.Trailer, want)
			}
		}},
	// Unknown length: the drain tries, but reads at most 256 KiB + 1 bytes
	// and keeps the connection only when it met the end before that.
	{name: "chunked-300k", first: send(testpeer.ChunkedResponse(300<<10, 16<<10, false)), read: 10},
	{name: "chunked-256k-left", first: send(testpeer.ChunkedResponse(256<<10+10, 16<<10, false)), read: 10, keeps: true},
	{name: "chunked-256k-plus-1-left", first: send(testpeer.ChunkedResponse(256<<10+11, 16<<10, false)), read: 10},
	// Transparent gzip makes resp.ContentLength -1, so a compressed length
	// over 256 KiB does not stop the drain when less than that is left.
	{name: "gzip-300k-half-read", first: send(gzipResponse(gzip300k)), read: 150 << 10, gzip: true, keeps: true,
		check: func(t *testing.T, resp *http.Response) {
			if resp.ContentLength != -1 || !resp.Uncompressed {
				t.Errorf("ContentLength %d, Uncompressed %v", resp.ContentLength, resp.Uncompressed)
			}
		}},
	{name: "gzip-300k-left", first: send(gzipResponse(gzip300k)), read: 10, gzip: true},
	// A read buffer that holds the whole rest does not change the limit.
	{name: "gzip-600k-left-big-read-buffer", first: send(gzipResponse(gzip600k)), read: 10, gzip: true,
		set: func(tr *Transport) { tr.ReadBufferSize = 1 << 20 }},
	{name: "gzip-64k", first: send(gzipResponse(gzip64k)), read: 10, gzip: true, keeps: true},
	{name: "stalled-mid-body", first: func(c *rawConn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n"+strings.Repeat("x", 100))
	}, read: 10, realWindow: true},
	{name: "chunked-stalled-mid-body", first: func(c *rawConn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n"+strings.Repeat("x", 100)+"\r\n")
	}, read: 10, realWindow: true},
	{name: "response-connection-close", first: send("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("x", 1000)), read: 10},
	{name: "request-close", first: send(lengthResponse(100000)), read: 10, mod: func(r *http.Request) { r.Close = true }},
	{name: "disable-keepalives", first: send(lengthResponse(100000)), read: 10, set: func(tr *Transport) { tr.DisableKeepAlives = true }},
	{name: "http10-until-close", first: func(c *rawConn) {
		io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\n"+strings.Repeat("x", 1000))
	}, read: 10},
}

// TestEarlyClose closes each body early and checks what became of its
// connection, that the counters agree, and that nothing (goroutine, file
// descriptor) outlives the test.
func TestEarlyClose(t *testing.T) {
	before := goleak.IgnoreCurrent()
	for _, tc := range earlyCloseCases {
		t.Run(tc.name, func(t *testing.T) {
			fds := countFDs(t)
			t.Run("requests", func(t *testing.T) { // its cleanups close the server
				srv := startRawServer(t, earlyCloseScript(tc.first))
				tr := &Transport{DisableCompression: !tc.gzip, drainTime: time.Minute}
				if tc.realWindow {
					tr.drainTime = 0
				}
				if tc.set != nil {
					tc.set(tr)
				}
				defer tr.CloseIdleConnections()
				e := newEarlyCloseRequest(t, srv.URL)
				if tc.mod != nil {
					tc.mod(e.req)
				}
				resp := e.send(t, tr)
				closeEarly(t, e, resp, tc.read)
				kept := e.settle(t, srv)
				if want := wantKept(tc.keeps); kept != want {
					t.Fatalf("%s: connection kept = %v, want %v", runtime.Version(), kept, want)
				}
				if tc.check != nil {
					tc.check(t, resp)
				}
				if !tr.DisableKeepAlives && tc.mod == nil { // the others close every connection
					checkSettled(t, tr, srv, kept)
				}
			})
			noGoroutinesSince(t, before)
			waitFor(t, func() bool { return countFDs(t) <= fds })
		})
	}
}

// noGoroutinesSince fails t when goroutines started since before are still
// running after a generous bound (goleak.Find alone retries for about half a
// second, which a loaded machine can exceed while servers shut down).
func noGoroutinesSince(t *testing.T, before goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := goleak.Find(before)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// TestEarlyCloseDuringBlockedRead closes the body while a Read waits for
// data. Go 1.26: the Read fails at once and the connection closes. Go 1.27
// (net/http keeps the same window): the Read waits on; data that comes in
// the window goes to the Read and the drain takes the rest (the connection
// is kept), while a server that stays silent has the connection closed when
// the window ends.
func TestEarlyCloseDuringBlockedRead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sendsRest bool // the server sends the rest of the body after Close
	}{
		{name: "rest-arrives", sendsRest: true},
		{name: "server-silent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := startRawServer(t, earlyCloseScript(func(c *rawConn) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n"+strings.Repeat("x", 100))
				if !tc.sendsRest {
					return
				}
				select {
				case <-release:
					io.WriteString(c, strings.Repeat("y", 9900))
				case <-c.s.close:
				}
			}))
			tr := &Transport{drainTime: time.Minute}
			if !tc.sendsRest {
				tr.drainTime = 0
			}
			defer tr.CloseIdleConnections()
			e := newEarlyCloseRequest(t, srv.URL)
			resp := e.send(t, tr)
			if _, err := io.ReadFull(resp.Body, make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			go func() {
				n, err := resp.Body.Read(make([]byte, 10))
				done <- result{n, err}
			}()
			waitReading(t, resp.Body.(*h1conn.Body))
			resp.Body.Close()
			e.cancel()
			// Go 1.27 keeps the Read waiting in the window: the rest must come
			// now. Go 1.26 interrupts it: the rest comes only once it
			// returned, or the Read could still get it (a Read past its
			// deadline check but not yet in the read system call when Close
			// set the deadline reads whatever has arrived).
			if toolchainDrains {
				close(release)
			}
			r := <-done
			if !toolchainDrains {
				close(release)
			}
			switch {
			case toolchainDrains && tc.sendsRest:
				// The Read may get the first bytes of the rest.
				if r.err != nil && r.err.Error() != gzipbody.ErrReadAfterClose.Error() {
					t.Errorf("blocked Read: %d, %v", r.n, r.err)
				}
			case r.n != 0 || r.err == nil || r.err.Error() != gzipbody.ErrReadAfterClose.Error():
				t.Errorf("blocked Read: %d, %v; want 0, %v", r.n, r.err, gzipbody.ErrReadAfterClose)
			}
			kept := e.settle(t, srv)
			if want := wantKept(tc.sendsRest); kept != want {
				t.Fatalf("%s: connection kept = %v, want %v", runtime.Version(), kept, want)
			}
			checkSettled(t, tr, srv, kept)
		})
	}
}

// waitReading waits until a Read on b is doing I/O (its state is
// bodyReading), so that Close meets the blocked Read.
func waitReading(t *testing.T, b *h1conn.Body) {
	t.Helper()
	waitFor(t, b.InRead)
}

// TestEarlyCloseThenCloseIdleConnections: CloseIdleConnections while a
// drain runs closes the drained connection when the drain ends instead of
// pooling it (net/http's closeIdle does the same), so a caller that closes
// a body and then the idle connections is left with nothing open.
func TestEarlyCloseThenCloseIdleConnections(t *testing.T) {
	release := make(chan struct{})
	srv := startRawServer(t, earlyCloseScript(func(c *rawConn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n"+strings.Repeat("x", 100))
		select {
		case <-release:
			io.WriteString(c, strings.Repeat("y", 9900))
		case <-c.s.close:
		}
	}))
	tr := &Transport{drainTime: time.Minute}
	defer tr.CloseIdleConnections()
	e := newEarlyCloseRequest(t, srv.URL)
	resp := e.send(t, tr)
	closeEarly(t, e, resp, 100)
	tr.CloseIdleConnections()
	close(release) // the drain can now reach the end of the body
	if e.settle(t, srv) {
		t.Fatal("connection pooled after CloseIdleConnections")
	}
	checkSettled(t, tr, srv, false)
}

// TestEarlyCloseAbortedRequest: a request whose context ended before Close
// has its connection closed (nothing to drain), on both toolchains.
func TestEarlyCloseAbortedRequest(t *testing.T) {
	srv := startRawServer(t, earlyCloseScript(send(lengthResponse(100000))))
	tr := &Transport{drainTime: time.Minute}
	defer tr.CloseIdleConnections()
	e := newEarlyCloseRequest(t, srv.URL)
	resp := e.send(t, tr)
	e.cancel()
	pc := resp.Body.(*h1conn.Body).Conn()
	waitFor(t, func() bool { return pc.Aborted() != nil }) // the context's AfterFunc ran
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil || err.Error() != gzipbody.ErrReadAfterClose.Error() {
		t.Fatalf("Read after Close: %v", err)
	}
	if e.settle(t, srv) {
		t.Fatal("aborted connection pooled")
	}
	checkSettled(t, tr, srv, false)
}

// TestEarlyCloseTLS: the drain's deadline works the same through TLS (an
// httptest server speaking HTTP/1.1; its ConnState tells when the client
// closed the connection).
func TestEarlyCloseTLS(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards closed
	closed := 0
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(bytes.Repeat([]byte("x"), 100000))
			return
		}
		io.WriteString(w, "ok")
	}))
	hs.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			mu.Lock()
			closed++
			mu.Unlock()
		}
	}
	hs.Config.ErrorLog = nilLogger()
	hs.TLS = cert.ServerConfig()
	hs.StartTLS()
	defer hs.Close()
	tr := &Transport{TLSClientConfig: cert.ClientConfig(), drainTime: time.Minute}
	defer tr.CloseIdleConnections()

	e := newEarlyCloseRequest(t, hs.URL+"/big")
	resp := e.send(t, tr)
	if resp.TLS == nil || resp.ProtoMajor != 1 {
		t.Fatalf("not HTTP/1.1 over TLS: %s, TLS %v", resp.Proto, resp.TLS != nil)
	}
	closeEarly(t, e, resp, 10)
	var kept bool
	waitFor(t, func() bool {
		select {
		case err := <-e.putIdle:
			if err != nil {
				t.Fatalf("PutIdleConn(%v)", err)
			}
			kept = true
			return true
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return closed > 0
	})
	if want := wantKept(true); kept != want {
		t.Fatalf("%s: connection kept = %v, want %v", runtime.Version(), kept, want)
	}
	var reused bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req := newReq(t, "GET", hs.URL, nil)
	resp, err = tr.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "ok" {
		t.Fatalf("next request: %q, %v", body, err)
	}
	if reused != kept {
		t.Errorf("next request reused = %v, want %v", reused, kept)
	}
}
