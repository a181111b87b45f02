package transport

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
)

// scenario is one row of the differential table.
type scenario struct {
	name    string
	tls     bool
	handler http.HandlerFunc
	raw     func(c *rawConn)
	set     settings
	// run does requests with rt against srv and returns what it observed.
	run func(t *testing.T, rt http.RoundTripper, srv *testServer) []any
	// noConnCount skips comparing the number of connections (racy by design).
	noConnCount bool
	// h2: TLS with HTTP/2 offered by ALPN and ForceAttemptHTTP2 on both
	// clients; every request the server reads must be HTTP/2.0.
	h2 bool
}

// boundedReq is a GET that gives up after 10s, so a CancelRequest that
// does nothing shows as a deadline error instead of a hang.
func boundedReq(t *testing.T, url string) *http.Request {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return newReq(t, "GET", url, nil).WithContext(ctx)
}

// requestCanceler is the deprecated CancelRequest both transports have.
type requestCanceler interface{ CancelRequest(*http.Request) }

func newReq(t *testing.T, method, url string, body io.Reader) *http.Request {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// gets does n sequential GETs of path.
func gets(n int, path string) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		var out []any
		for i := 0; i < n; i++ {
			out = append(out, observe(rt, newReq(t, "GET", srv.URL+path, nil)))
		}
		return out
	}
}

func one(method, path string, body func() io.Reader, mod func(*http.Request)) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		var b io.Reader
		if body != nil {
			b = body()
		}
		req := newReq(t, method, srv.URL+path, b)
		if mod != nil {
			mod(req)
		}
		return []any{observe(rt, req)}
	}
}

func hello(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Path", r.URL.Path)
	io.WriteString(w, "hello "+r.Method)
}

func gzipped(s string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(s))
	zw.Close()
	return buf.Bytes()
}

func gzipHandler(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gzipped(strings.Repeat("zipped ", 100)))
		return
	}
	io.WriteString(w, "plain")
}

// rawRespond reads requests on the connection and answers each with resp.
func rawRespond(resps ...string) func(c *rawConn) {
	return func(c *rawConn) {
		for _, r := range resps {
			if _, err := c.readRequest(); err != nil {
				return
			}
			io.WriteString(c, r)
		}
		// Close: a response without framing is delimited by the close.
	}
}

// rawRespondClose answers one request with resp and closes.
func rawRespondClose(resp string) func(c *rawConn) {
	return func(c *rawConn) {
		if _, err := c.readRequest(); err == nil {
			io.WriteString(c, resp)
		}
	}
}

// streamBody is a body with no length and no GetBody (streamed, chunked).
type streamBody struct{ r io.Reader }

func (s *streamBody) Read(p []byte) (int, error) { return s.r.Read(p) }

var big = strings.Repeat("0123456789abcdef", 1<<18) // 4 MiB

var scenarios = []scenario{
	{name: "contract/get", handler: hello, run: gets(1, "/a")},
	{name: "keepalive/three-gets-one-conn", handler: hello, run: gets(3, "/k")},
	{name: "keepalive/head", handler: hello, run: one("HEAD", "/h", nil, nil)},
	{name: "keepalive/204", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }, run: gets(2, "/")},
	{name: "keepalive/304", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(304) }, run: gets(2, "/")},
	{name: "keepalive/disable", set: settings{DisableKeepAlives: true}, handler: hello, run: gets(2, "/")},
	{name: "keepalive/response-close", handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	}, run: gets(2, "/")},
	{name: "keepalive/request-close", handler: hello, run: one("GET", "/", nil, func(r *http.Request) { r.Close = true })},
	// Early Close: Go 1.26 closes the connection, Go 1.27 drains a body of
	// at most 256 KiB (or unknown length) for up to 50 ms and keeps the
	// connection if that reaches the end. earlyCloseRun waits until the
	// connection settled (pooled or closed) before the next request, so the
	// rows compare outcomes, not a race between net/http's background drain
	// and the next request. Bodies that are kept are written whole at once,
	// so net/http's drain (50 ms, not adjustable) reaches their end.
	{name: "keepalive/early-close-100k", raw: earlyCloseScript(send(lengthResponse(100000))), run: earlyCloseRun(10)},
	{name: "keepalive/early-close-over-256k", raw: earlyCloseScript(send(lengthResponse(300 << 10))), run: earlyCloseRun(10)},
	{name: "keepalive/early-close-stalled", raw: earlyCloseScript(func(c *rawConn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n"+strings.Repeat("x", 100))
	}), run: earlyCloseRun(10)},
	{name: "keepalive/early-close-chunked-trailer", raw: earlyCloseScript(send(testpeer.ChunkedResponse(120000, 30000, true))), run: earlyCloseRun(10)},
	{name: "keepalive/early-close-gzip-half-read", raw: earlyCloseScript(send(gzipResponse(gzip300k))), run: earlyCloseRun(150 << 10)},
	{name: "body/post-bytes", handler: hello, run: one("POST", "/p", func() io.Reader { return strings.NewReader("payload") }, nil)},
	{name: "body/post-empty", handler: hello, run: one("POST", "/p", nil, nil)},
	{name: "body/put-stream-chunked", handler: hello, run: one("PUT", "/p", func() io.Reader { return &streamBody{strings.NewReader("streamed")} }, nil)},
	{name: "body/post-trailers", handler: hello, run: one("POST", "/t", func() io.Reader { return &streamBody{strings.NewReader("abc")} }, func(r *http.Request) {
		r.Trailer = http.Header{"X-Sum": {"42"}}
	})},
	{name: "body/large-both-ways", handler: func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d|", len(b))
		w.Write([]byte(big))
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		o1 := observe(rt, newReq(t, "POST", srv.URL, strings.NewReader(big)))
		o2 := observe(rt, newReq(t, "POST", srv.URL, &streamBody{strings.NewReader(big)}))
		srv.mu.Lock()
		for i := range srv.seen {
			srv.seen[i].Body = fmt.Sprint(len(srv.seen[i].Body))
		}
		srv.mu.Unlock()
		return []any{o1.Status, len(o1.Body), o1.Body[:8], o2.Status, len(o2.Body), o2.Body[:8]}
	}},
	{name: "framing/chunked-trailer-response", handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T")
		io.WriteString(w, "part1")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part2")
		w.Header().Set("X-T", "tv")
	}, run: gets(2, "/")},
	{name: "framing/raw-chunked-ext-and-trailer", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-A\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-A: 1\r\nX-B: 2\r\n\r\n"), run: gets(1, "/")},
	{name: "framing/raw-http10-close-delimited", raw: rawRespondClose("HTTP/1.0 200 OK\r\nX: y\r\n\r\nuntil close"), run: gets(1, "/")},
	{name: "framing/raw-te-and-cl", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "framing/raw-duplicate-equal-cl", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "framing/raw-conflicting-cl", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"), run: gets(1, "/")},
	{name: "framing/raw-bad-cl", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: x1\r\n\r\nok"), run: gets(1, "/")},
	{name: "framing/raw-bad-status-line", raw: rawRespond("HTTP/1.1 abc OK\r\n\r\n"), run: gets(1, "/")},
	{name: "framing/raw-garbage", raw: rawRespond("garbage\r\n\r\n"), run: gets(1, "/")},
	{name: "framing/raw-bad-version", raw: rawRespond("HTTX/1.1 200 OK\r\n\r\n"), run: gets(1, "/")},
	{name: "framing/raw-bad-chunk-size", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "framing/raw-unsupported-te", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"), run: gets(1, "/")},
	{name: "framing/raw-mid-body-close", raw: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..")
	}, run: gets(1, "/")},
	{name: "framing/raw-mid-chunk-close", raw: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nabc")
	}, run: gets(1, "/")},
	{name: "framing/raw-lowercase-and-fold", raw: rawRespond("HTTP/1.1 200 OK\r\ncontent-type: text/x\r\nx-folded: a\r\n  b\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "framing/raw-bare-lf", raw: rawRespond("HTTP/1.1 200 OK\nContent-Length: 2\nX-A: b\n\nok"), run: gets(1, "/")},
	{name: "framing/raw-bad-header-line", raw: rawRespond("HTTP/1.1 200 OK\r\nBad Key: v\r\n\r\n"), run: gets(1, "/")},
	{name: "framing/raw-status-only-code", raw: rawRespond("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"), run: gets(1, "/")},
	{name: "limits/header-too-large", set: settings{MaxResponseHeaderBytes: 1000}, raw: rawRespond("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 5000) + "\r\n\r\n"), run: gets(1, "/")},
	{name: "compression/gzip", handler: gzipHandler, run: gets(2, "/")},
	{name: "compression/disabled", set: settings{DisableCompression: true}, handler: gzipHandler, run: gets(1, "/")},
	{name: "compression/caller-accept-encoding", handler: gzipHandler, run: one("GET", "/", nil, func(r *http.Request) { r.Header.Set("Accept-Encoding", "gzip") })},
	{name: "compression/range", handler: gzipHandler, run: one("GET", "/", nil, func(r *http.Request) { r.Header.Set("Range", "bytes=0-1") })},
	{name: "compression/head", handler: gzipHandler, run: one("HEAD", "/", nil, nil)},
	{name: "1xx/early-hints", raw: rawRespond("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: traced(gets(1, "/"))},
	// The server always sends 100 Continue (the harness reads the body before
	// the handler runs). The timeout is only a fallback that must not fire.
	{name: "1xx/continue-accepted", set: settings{ExpectContinueTimeout: time.Minute}, handler: hello,
		run: tracedLanes(h1ContinueLanes, continueTrace("PutIdleConn(<nil>)"), nil, postExpectContinue)},
	// On a closing connection nothing in net/http waits for its writer, which
	// may report WroteRequest after RoundTrip returned: await it.
	{name: "1xx/continue-rejected", set: settings{ExpectContinueTimeout: time.Minute}, handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(417)
	}, run: tracedLanes(h1ContinueLanes, continueTrace(), []string{"WroteRequest"}, postExpectContinue)},
	// A final answer without 100 Continue on a connection that stays open:
	// the body is sent after it, and the connection serves the next
	// request. The answer's framing (its length, Pragma, gzip) is read
	// after the body went out.
	{name: "1xx/continue-final-keepalive", set: settings{ExpectContinueTimeout: time.Minute}, raw: func(c *rawConn) {
		req, err := http.ReadRequest(c.br)
		if err != nil {
			return
		}
		z := gzipped("refused")
		fmt.Fprintf(c, "HTTP/1.1 417 Expectation Failed\r\nContent-Length: %d\r\nContent-Encoding: gzip\r\nPragma: no-cache\r\n\r\n%s", len(z), z)
		body, _ := io.ReadAll(req.Body)
		c.s.record(seenRequest{Method: req.Method, URI: req.RequestURI, Header: req.Header, Body: string(body)})
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		<-c.s.close
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		return append(postExpectContinue(t, rt, srv), gets(1, "/")(t, rt, srv)...)
	}},
	{name: "101/switch", raw: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		buf := make([]byte, 4)
		io.ReadFull(c.br, buf)
		c.Write(bytes.ToUpper(buf))
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "GET", srv.URL, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return []any{err.Error()}
		}
		rw, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			return []any{"body not ReadWriteCloser"}
		}
		rw.Write([]byte("ping"))
		buf := make([]byte, 4)
		_, err = io.ReadFull(rw, buf)
		rw.Close()
		return []any{resp.StatusCode, string(buf), fmt.Sprint(err)}
	}},
	{name: "limits/response-header-timeout", set: settings{ResponseHeaderTimeout: 50 * time.Millisecond}, raw: func(c *rawConn) {
		c.readRequest()
		<-c.s.close
	}, run: gets(1, "/")},
	{name: "cancel/context-while-waiting", raw: func(c *rawConn) {
		c.readRequest()
		<-c.s.close
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		return []any{observe(rt, newReq(t, "GET", srv.URL, nil).WithContext(ctx))}
	}},
	{name: "cancel/deadline-during-body", raw: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
		<-c.s.close
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return []any{observe(rt, newReq(t, "GET", srv.URL, nil).WithContext(ctx))}
	}},
	{name: "cancel/legacy-cancel-channel", raw: func(c *rawConn) {
		c.readRequest()
		<-c.s.close
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "GET", srv.URL, nil)
		ch := make(chan struct{})
		req.Cancel = ch
		time.AfterFunc(30*time.Millisecond, func() { close(ch) })
		return []any{observe(rt, req)}
	}},
	{name: "cancel/cancel-request-while-waiting", raw: func(c *rawConn) {
		c.readRequest()
		<-c.s.close
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := boundedReq(t, srv.URL)
		cancelled := make(chan struct{})
		go func() {
			defer close(cancelled)
			// The request is registered before it is written. waitFor
			// fails the test if the server never sees it.
			waitFor(t, func() bool { return srv.seenCount() >= 1 })
			rt.(requestCanceler).CancelRequest(req)
		}()
		o := observe(rt, req)
		<-cancelled
		return []any{o}
	}},
	{name: "cancel/cancel-request-during-body", raw: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
		<-c.s.close
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := boundedReq(t, srv.URL)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return []any{observeResponse(resp, err)}
		}
		rt.(requestCanceler).CancelRequest(req)
		return []any{observeResponse(resp, nil)}
	}},
	// Cancelling a request that is over changes nothing: the next request
	// reuses its connection.
	{name: "cancel/cancel-request-after-done", handler: hello, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "GET", srv.URL, nil)
		first := observe(rt, req)
		rt.(requestCanceler).CancelRequest(req)
		rt.(requestCanceler).CancelRequest(newReq(t, "GET", srv.URL, nil)) // never sent
		return []any{first, observe(rt, newReq(t, "GET", srv.URL, nil))}
	}},
	{name: "cancel/already-canceled", handler: hello, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return []any{observe(rt, newReq(t, "GET", srv.URL, nil).WithContext(ctx))}
	}},
	{name: "validation/all", handler: hello, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		var out []any
		bad := []func(*http.Request){
			func(r *http.Request) { r.URL = nil },
			func(r *http.Request) { r.Header = nil },
			func(r *http.Request) { r.Header["Bad Name"] = []string{"v"} },
			func(r *http.Request) { r.Header["X"] = []string{"a\r\nb"} },
			func(r *http.Request) { r.Trailer = http.Header{"X": {"a\nb"}} },
			func(r *http.Request) { r.URL.Scheme = "ftp" },
			func(r *http.Request) { r.URL.Host = "" },
			func(r *http.Request) { r.Method = "BAD METHOD" },
		}
		for _, f := range bad {
			req := newReq(t, "GET", srv.URL, nil)
			f(req)
			out = append(out, observe(rt, req))
		}
		return out
	}},
	// net/http dials before it notices; ferry fails before dialing.
	{name: "validation/content-length-nil-body", handler: hello, noConnCount: true, run: one("GET", "/", nil, func(r *http.Request) { r.ContentLength = 5 })},
	{name: "retry/server-closed-idle", raw: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// close right away although keep-alive was implied
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		// A GET retries on a fresh connection either way. The streamed POST
		// cannot be retried, so it must find the closed connection already
		// out of the pool: ferry checks an idle connection before reusing it
		// for such a request; net/http drops it when its reader goroutine
		// sees the EOF, so wait for net/http's close of it.
		closes := watchClientCloses(rt)
		o1 := observe(rt, newReq(t, "GET", srv.URL, nil))
		waitConnsClosed(srv)
		o2 := observe(rt, newReq(t, "GET", srv.URL, nil))
		waitConnsClosed(srv)
		closes.await(t, 2)
		o3 := observe(rt, newReq(t, "POST", srv.URL, &streamBody{strings.NewReader("x")}))
		return []any{o1, o2, o3}
	}},
	{name: "retry/closed-after-request-get", raw: func(c *rawConn) {
		if c.n == 0 {
			c.readRequest()
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			c.readRequest() // then close without answering
			return
		}
		rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nyes")(c)
	}, run: gets(2, "/")},
	{name: "retry/closed-after-request-post", raw: func(c *rawConn) {
		if c.n == 0 {
			c.readRequest()
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			c.readRequest()
			return
		}
		rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nyes")(c)
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		o1 := observe(rt, newReq(t, "GET", srv.URL, nil))
		o2 := observe(rt, newReq(t, "POST", srv.URL, &streamBody{strings.NewReader("x")}))
		o3 := observe(rt, newReq(t, "POST", srv.URL, strings.NewReader("y")))
		return []any{o1, o2, o3}
	}},
	{name: "conns/max-conns-per-host", set: settings{MaxConnsPerHost: 1}, handler: hello, run: parallel(4, 3)},
	{name: "conns/concurrency-64", handler: hello, run: parallel(64, 4), noConnCount: true},
	{name: "tls/get", tls: true, handler: hello, run: gets(2, "/")},
	{name: "tracing/get-twice", handler: hello, run: traced(gets(2, "/"))},
	{name: "tracing/post", handler: hello, run: traced(one("POST", "/", func() io.Reader { return strings.NewReader("abc") }, nil))},
	{name: "tracing/tls", tls: true, handler: hello, run: traced(gets(2, "/"))},
}

// clientCloses counts the connections a net/http Transport closed.
type clientCloses struct {
	mu     sync.Mutex // guards n
	n      int
	closed chan struct{} // one send per close
}

// watchClientCloses makes a net/http Transport (before its first request)
// dial connections whose Close is counted; for ferry it returns a watch
// that awaits nothing.
func watchClientCloses(rt http.RoundTripper) *clientCloses {
	std, ok := rt.(*http.Transport)
	if !ok {
		return nil
	}
	w := &clientCloses{closed: make(chan struct{}, 64)}
	std.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &closeCountingConn{Conn: c, w: w}, nil
	}
	return w
}

// await waits (boundedly) until n connections were closed.
func (w *clientCloses) await(t *testing.T, n int) {
	t.Helper()
	if w == nil {
		return
	}
	deadline := time.After(time.Minute)
	for {
		w.mu.Lock()
		got := w.n
		w.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-w.closed:
		case <-deadline:
			t.Fatalf("net/http closed %d connections, want %d", got, n)
		}
	}
}

type closeCountingConn struct {
	net.Conn
	w    *clientCloses
	once sync.Once
}

func (c *closeCountingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.w.mu.Lock()
		c.w.n++
		c.w.mu.Unlock()
		c.w.closed <- struct{}{}
	})
	return err
}

// earlyCloseRun reads n bytes of the first response's body, closes it,
// waits until its connection settled (back in the pool or closed; see
// earlyclose_test.go) and does a second request; it returns whether the
// connection was kept, what the first response's Trailer and ContentLength
// were then, and the second request.
func earlyCloseRun(n int) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		e := newEarlyCloseRequest(t, srv.URL)
		resp, err := rt.RoundTrip(e.req)
		if err != nil {
			return []any{errKind(err) + ": " + normalizeErr(err)}
		}
		closeEarly(t, e, resp, n)
		kept := e.settle(t, srv)
		return []any{kept, fmt.Sprint(resp.Trailer), resp.ContentLength, observe(rt, newReq(t, "GET", srv.URL, nil))}
	}
}

// waitConnsClosed waits until a scripted server has closed every connection.
func waitConnsClosed(srv *testServer) {
	for {
		if srv.liveCount() == 0 {
			time.Sleep(20 * time.Millisecond) // let the FIN reach the client's socket
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// parallel runs g goroutines doing n GETs each and reports the results.
func parallel(g, n int) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[string]int{}
		for i := 0; i < g; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < n; j++ {
					o := observe(rt, newReq(t, "GET", srv.URL+"/p", nil))
					mu.Lock()
					counts[fmt.Sprintf("%d %s %s", o.Status, o.Body, o.Err)]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		srv.mu.Lock()
		srv.seen = nil // order differs between runs
		srv.mu.Unlock()
		return []any{counts}
	}
}

// traced runs f with a trace recorder on every request and appends the
// events.
func traced(f func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		rec := &traceRecorder{}
		wrapped := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return rt.RoundTrip(r.WithContext(httptraceWith(r.Context(), rec)))
		})
		out := f(t, wrapped, srv)
		return append(out, rec.events())
	}
}

// hookLanes describes what net/http guarantees about the order of its
// httptrace hooks on one HTTP/1 request, where they are fired from more than
// one goroutine: each lane is the hooks one goroutine fires, in program order
// (so their relative order is fixed), and before lists the orders between
// lanes that follow from a synchronisation (a channel hand-off, or the server
// answering only what it has received). Hooks in different lanes with no
// edge between them race in net/http, so only their presence is compared.
type hookLanes struct {
	lanes  [][]string
	before [][2]string
}

// h1ContinueLanes: roundTrip takes the connection and hands the request to
// the writer goroutine (headers, Wait100Continue after flushing them, the body
// once the reader passes the 100 on, WroteRequest) and to the reader
// goroutine (first byte, the 100, the final response, PutIdleConn once the
// writer reported success).
var h1ContinueLanes = hookLanes{
	lanes: [][]string{
		{"GetConn", "ConnectStart", "ConnectDone", "GotConn", "WroteHeaderField", "WroteHeaders", "Wait100Continue", "WroteRequest"},
		{"GotFirstResponseByte", "Got100Continue", "Got1xx", "PutIdleConn"},
	},
	before: [][2]string{
		{"WroteHeaders", "GotFirstResponseByte"}, // the server answers what it read
		{"Got100Continue", "WroteRequest"},       // the body waits for the 100
		{"WroteRequest", "PutIdleConn"},          // reuse waits for the write
	},
}

// hookName is the hook an event records ("GotConn(reused=...)" -> "GotConn").
func hookName(ev string) string {
	if i := strings.IndexByte(ev, '('); i >= 0 {
		return ev[:i]
	}
	return ev
}

// project returns, per lane, the events of that lane in the order recorded;
// an event of no lane is an error in the description.
func (l hookLanes) project(t *testing.T, ev []string) [][]string {
	out := make([][]string, len(l.lanes))
next:
	for _, e := range ev {
		for i, lane := range l.lanes {
			for _, h := range lane {
				if hookName(e) == h {
					out[i] = append(out[i], e)
					continue next
				}
			}
		}
		t.Errorf("trace event %q is in no lane", e)
	}
	return out
}

// checkBefore reports events violating a before edge: every event of the
// first hook must precede every event of the second.
func (l hookLanes) checkBefore(t *testing.T, who string, ev []string) {
	for _, edge := range l.before {
		lastA, firstB := -1, len(ev)
		for i, e := range ev {
			switch hookName(e) {
			case edge[0]:
				lastA = i
			case edge[1]:
				if i < firstB {
					firstB = i
				}
			}
		}
		if lastA > firstB {
			t.Errorf("%s: %s after %s in %v", who, edge[0], edge[1], ev)
		}
	}
}

// tracedLanes is traced for requests whose hooks net/http fires from several
// goroutines. It waits (boundedly) until each hook in await has fired, since
// net/http may fire it after RoundTrip returned. What it returns for
// comparison is the per-lane projection of the events; both sequences must
// respect the lanes' before edges, and ferry, which fires every hook from
// the goroutine doing the exchange, must produce exactly ferryWant.
func tracedLanes(l hookLanes, ferryWant []string, await []string, f func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		rec := &traceRecorder{}
		wrapped := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return rt.RoundTrip(r.WithContext(httptraceWith(r.Context(), rec)))
		})
		out := f(t, wrapped, srv)
		for _, h := range await {
			rec.await(h, time.Minute)
		}
		ev := rec.events()
		who := "net/http"
		if _, ok := rt.(*Transport); ok {
			who = "ferry"
			if !reflect.DeepEqual(ev, ferryWant) {
				t.Errorf("ferry trace order\n got: %v\nwant: %v", ev, ferryWant)
			}
		}
		l.checkBefore(t, who, ev)
		return append(out, l.project(t, ev))
	}
}

// h2TraceLanes: an HTTP/2 request's connection hooks and header encoding
// (WroteHeaderField) run before its frames are flushed; WroteHeaders and
// WroteRequest are reported after the flush by the goroutine writing the
// request, GotFirstResponseByte by the connection's reader, so only the
// header fields are ordered before the first response byte (in net/http's
// HTTP/2 client and in ferry's alike).
var h2TraceLanes = hookLanes{
	lanes: [][]string{
		{"GetConn", "ConnectStart", "ConnectDone", "TLSHandshakeStart", "TLSHandshakeDone", "GotConn", "WroteHeaderField", "WroteHeaders", "WroteRequest"},
		{"GotFirstResponseByte"},
	},
	before: [][2]string{{"WroteHeaderField", "GotFirstResponseByte"}},
}

// tracedRequests is traced with a recorder per request, for requests whose
// writer may report after the response was read (so after the next request
// began): each request's events are awaited (boundedly) for the hooks in
// await, checked against the lanes' before edges and returned as per-lane
// projections, one per request.
func tracedRequests(l hookLanes, await []string, f func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		var mu sync.Mutex // guards recs
		var recs []*traceRecorder
		wrapped := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			rec := &traceRecorder{}
			mu.Lock()
			recs = append(recs, rec)
			mu.Unlock()
			return rt.RoundTrip(r.WithContext(httptraceWith(r.Context(), rec)))
		})
		out := f(t, wrapped, srv)
		mu.Lock()
		defer mu.Unlock()
		var perRequest [][][]string
		for i, rec := range recs {
			for _, h := range await {
				rec.await(h, time.Minute)
			}
			ev := rec.events()
			l.checkBefore(t, fmt.Sprintf("%T request %d", rt, i), ev)
			perRequest = append(perRequest, l.project(t, ev))
		}
		return append(out, perRequest)
	}
}

// postExpectContinue POSTs a 4-byte body with "Expect: 100-continue".
var postExpectContinue = one("POST", "/", func() io.Reader { return strings.NewReader("body") }, func(r *http.Request) { r.Header.Set("Expect", "100-continue") })

// continueTrace is ferry's exact trace of postExpectContinue on a fresh
// connection answered with 100 Continue, followed by tail.
func continueTrace(tail ...string) []string {
	return append([]string{
		"GetConn", "ConnectStart", "ConnectDone(false)", "GotConn(reused=false,wasIdle=false)",
		"WroteHeaderField(Host=HOST)", "WroteHeaderField(User-Agent=Go-http-client/1.1)",
		"WroteHeaderField(Content-Length=4)", "WroteHeaderField(Expect=100-continue)",
		"WroteHeaderField(Accept-Encoding=gzip)", "WroteHeaders", "Wait100Continue",
		"GotFirstResponseByte", "Got100Continue", "Got1xx(100)", "WroteRequest(false)",
	}, tail...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type diffResult struct {
	Obs   []any
	Seen  []seenRequest
	Conns int
}

// rowTimeout bounds one transport's run of a differential row; the
// slowest rows take a few hundred milliseconds.
const rowTimeout = 30 * time.Second

func TestDifferential(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	runDiffRows(t, scenarios, cert)
}

// runDiffRows runs each row against net/http and against ferry, each with
// a fresh server (TLS with cert for rows that ask for it), and fails where
// what the client or the server saw differs.
func runDiffRows(t *testing.T, rows []scenario, cert *selfsigned.Cert) {
	for _, sc := range rows {
		t.Run(sc.name, func(t *testing.T) {
			var res [2]diffResult
			for i, impl := range []string{"nethttp", "ferry"} {
				var srv *testServer
				if sc.raw != nil {
					srv = startRawServer(t, sc.raw)
				} else {
					srv = startHandlerServerH2(t, sc.handler, sc.tls || sc.h2, sc.h2, cert)
				}
				var tlsCfg *tls.Config
				if sc.tls || sc.h2 {
					tlsCfg = cert.ClientConfig()
				}
				set := sc.set
				set.ForceAttemptHTTP2 = set.ForceAttemptHTTP2 || sc.h2
				rt := set.nethttp(tlsCfg)
				if impl == "ferry" {
					rt = set.ferry(tlsCfg)
				}
				// A row that hangs (a client waiting for bytes that never
				// come) fails after rowTimeout instead of stalling the suite.
				hung := time.AfterFunc(rowTimeout, srv.abort)
				obs := sc.run(t, rt, srv)
				if !hung.Stop() {
					t.Errorf("%s: the row did not end within %v; its server's connections were closed to end it", impl, rowTimeout)
				}
				closeIdle(rt)
				srv.mu.Lock()
				res[i] = diffResult{Obs: obs, Seen: srv.seen, Conns: srv.conns}
				if sc.h2 {
					for proto, n := range srv.protos {
						if proto != "HTTP/2.0" {
							t.Errorf("%s: the server read %d requests over %s, want every one over HTTP/2.0", impl, n, proto)
						}
					}
				}
				srv.mu.Unlock()
				if sc.noConnCount {
					res[i].Conns = 0
				}
			}
			if !reflect.DeepEqual(res[0].Obs, res[1].Obs) {
				t.Errorf("client observations differ\nnet/http: %+v\nferry:    %+v", res[0].Obs, res[1].Obs)
			}
			if !reflect.DeepEqual(res[0].Seen, res[1].Seen) {
				t.Errorf("server saw different requests\nnet/http: %+v\nferry:    %+v", res[0].Seen, res[1].Seen)
			}
			if res[0].Conns != res[1].Conns {
				t.Errorf("connections: net/http %d, ferry %d", res[0].Conns, res[1].Conns)
			}
		})
	}
}
