package transport

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h3conn"
)

// Side-by-side harness for the HTTP/3 path: one handler served over
// HTTP/1.1 with TLS (TCP) and over HTTP/3 (quic-go's server), the same
// request sent through net/http.Transport over TCP (the reference) and
// through ferry over HTTP/3, and what the caller sees compared.

// h3Twin is the pair of clients for one handler.
type h3Twin struct {
	url  string
	ref  http.RoundTripper // net/http.Transport over TCP
	h3   *Transport        // ferry, with a warm HTTP/3 connection to the handler
	sent atomic.Int64      // requests ferry handed to an HTTP/3 connection
}

// newH3Twin serves h over TCP and HTTP/3 and returns the clients. The
// ferry transport's HTTP/3 connection is up before it returns (a GET of
// /h3twin-warm must come back over HTTP/3.0; h answers it however it
// likes). mod, if set, configures both transports' common fields.
func newH3Twin(t *testing.T, h http.Handler, mod func(*http.Transport)) *h3Twin {
	t.Helper()
	u := startTLS(t, h)
	port, _ := startH3(t, h, nil)
	ref := &http.Transport{TLSClientConfig: h3Cert(t).ClientConfig()}
	if mod != nil {
		mod(ref)
	}
	t.Cleanup(ref.CloseIdleConnections)
	tr := newH3Transport(t, func(tr *Transport) {
		tr.h3.headStart = time.Minute
		tr.DisableCompression = ref.DisableCompression
		tr.MaxResponseHeaderBytes = ref.MaxResponseHeaderBytes
		tr.ResponseHeaderTimeout = ref.ResponseHeaderTimeout
		tr.ExpectContinueTimeout = ref.ExpectContinueTimeout
	})
	tw := &h3Twin{url: u, ref: ref, h3: tr}
	tr.h3.beforeSend = func(*h3conn.Conn) { tw.sent.Add(1) }
	advertise(t, tr.altSvcCache(), u, altValue("", port))
	req, err := http.NewRequest("GET", u+"/h3twin-warm", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Proto != "HTTP/3.0" {
		t.Fatalf("warm-up request went over %s, want HTTP/3.0", resp.Proto)
	}
	return tw
}

// both runs f with each client and fails the test where the outcomes
// differ. f returns a description of what the caller saw.
func (tw *h3Twin) both(t *testing.T, f func(t *testing.T, rt http.RoundTripper, u string) string) {
	t.Helper()
	want := f(t, tw.ref, tw.url)
	before := tw.sent.Load()
	got := f(t, tw.h3, tw.url)
	if tw.sent.Load() == before {
		t.Fatalf("ferry did not send the request over HTTP/3 (it saw: %s)", got)
	}
	if got != want {
		t.Errorf("HTTP/3 path differs from net/http over TCP\nferry h3: %s\nnet/http: %s", got, want)
	}
}

// describe summarises a RoundTrip outcome and the body read to its end,
// leaving out what legitimately differs between protocols (Proto, the
// headers servers add on their own).
func describe(resp *http.Response, err error) string {
	if err != nil {
		// net/http wraps some errors in this when the HTTP/1.1
		// connection broke (depending on timing); a stream has no
		// such connection, and HTTP/2 returns them bare.
		return "error: " + strings.TrimPrefix(err.Error(), "net/http: HTTP/1.x transport connection broken: ")
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	var keys []string
	for k, v := range resp.Header {
		switch k {
		case "Date", "Alt-Svc":
			continue
		}
		keys = append(keys, k+"="+strings.Join(v, ","))
	}
	sort.Strings(keys)
	var tk []string
	for k, v := range resp.Trailer {
		tk = append(tk, k+"="+strings.Join(v, ","))
	}
	sort.Strings(tk)
	return fmt.Sprintf("status=%d cl=%d uncompressed=%v header=[%s] body=%q readErr=%v trailer=[%s]",
		resp.StatusCode, resp.ContentLength, resp.Uncompressed, strings.Join(keys, " "), b, rerr, strings.Join(tk, " "))
}

// failingBody is a request body whose Read fails after n bytes.
type failingBody struct {
	n      int
	err    error
	closed chan struct{}
}

var errBodyBroke = errors.New("test: request body broke")

func newFailingBody(n int) *failingBody {
	return &failingBody{n: n, err: errBodyBroke, closed: make(chan struct{})}
}

func (b *failingBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, b.err
	}
	k := min(len(p), b.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	b.n -= k
	return k, nil
}

func (b *failingBody) Close() error {
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	return nil
}

// awaitClosed reports whether b was closed within a hang guard.
func (b *failingBody) awaitClosed() string {
	select {
	case <-b.closed:
		return "body closed"
	case <-time.After(10 * time.Second):
		return "body NOT closed"
	}
}

// holdingBodyHandler reads the request body and then never answers: the
// request can only end with the client's error (the hang guard aside).
func holdingBodyHandler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// TestH3TwinRequestBodyFailure: a request body whose length is not its
// ContentLength, or whose Read fails, fails the request with net/http's
// error (the body's own error; "http: ContentLength=N with Body length M"),
// and the body is closed. Before, quic-go sent a short body as if it were
// whole (the server saw a truncated request and the caller got its answer)
// and reported the other cases as a stream error. The server never answers,
// so that the outcome does not depend on whether its answer or the
// client's error comes first.
func TestH3TwinRequestBodyFailure(t *testing.T) {
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/h3twin-warm" {
			return
		}
		holdingBodyHandler(w, r)
	}), nil)
	for _, tc := range []struct {
		name string
		body func() *failingBody
		cl   int64
	}{
		{"shorter_than_content_length", func() *failingBody { b := newFailingBody(5); b.err = io.EOF; return b }, 10},
		{"longer_than_content_length", func() *failingBody { b := newFailingBody(10); b.err = io.EOF; return b }, 5},
		{"read_error_known_length", func() *failingBody { return newFailingBody(3) }, 10},
		{"read_error_streamed", func() *failingBody { return newFailingBody(3) }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
				body := tc.body()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // hang guard
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, "POST", u, body)
				if err != nil {
					t.Fatal(err)
				}
				req.ContentLength = tc.cl
				resp, err := rt.RoundTrip(req)
				return fmt.Sprintf("%s; is body error %v; %s", describe(resp, err), errors.Is(err, errBodyBroke), body.awaitClosed())
			})
		})
	}
}

// TestH3TwinGot1xxResponseError: an error returned by the httptrace
// Got1xxResponse hook aborts the request with that error, as net/http
// does; quic-go ignored it and returned the final response. A hook that
// returns nil sees the 103 and the request goes on.
func TestH3TwinGot1xxResponseError(t *testing.T) {
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "final")
	}), nil)
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("hook_fails_", fail), func(t *testing.T) {
			tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
				boom := errors.New("test: no early hints please")
				var seen []string
				trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					seen = append(seen, fmt.Sprint(code, " ", h.Get("Link")))
					if fail {
						return boom
					}
					return nil
				}}
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", u, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := rt.RoundTrip(req)
				return fmt.Sprintf("%s; is hook error %v; hook saw %q", describe(resp, err), errors.Is(err, boom), seen)
			})
		})
	}
}

// TestH3TwinCompression: transparent gzip follows net/http's rules over
// HTTP/3 too: a response without a body (204, 304, Content-Length 0) keeps
// its Content-Encoding and length and is not marked Uncompressed, a 304
// without Content-Length has ContentLength 0, and "GZIP" in any case is
// decoded. quic-go decoded the empty ones (dropping both headers, length
// -1) and left "GZIP" encoded.
func TestH3TwinCompression(t *testing.T) {
	zipped := func(s string) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		io.WriteString(zw, s)
		zw.Close()
		return buf.Bytes()
	}
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked := r.Header.Get("Accept-Encoding")
		w.Header().Set("X-Asked", asked)
		switch r.URL.Path {
		case "/304":
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		case "/304-plain":
			w.WriteHeader(http.StatusNotModified)

		case "/204":
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(http.StatusNoContent)
		case "/empty":
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", "0")
		case "/gzip", "/GZIP":
			b := zipped("zipped")
			w.Header().Set("Content-Encoding", r.URL.Path[1:])
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.Write(b)
		}
	}), nil)
	for _, tc := range []struct {
		method, path string
		header       string // Accept-Encoding or Range set by the caller
	}{
		{"GET", "/304", ""},
		{"GET", "/304-plain", ""},
		{"GET", "/204", ""},
		{"GET", "/empty", ""},
		{"GET", "/gzip", ""},
		{"GET", "/GZIP", ""},
		{"GET", "/gzip", "Accept-Encoding: gzip"},
		{"GET", "/gzip", "Range: bytes=0-"},
		{"HEAD", "/gzip", ""},
	} {
		t.Run(tc.method+tc.path+" "+tc.header, func(t *testing.T) {
			tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
				req, err := http.NewRequest(tc.method, u+tc.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if k, v, ok := strings.Cut(tc.header, ": "); ok {
					req.Header.Set(k, v)
				}
				return describe(rt.RoundTrip(req))
			})
		})
	}
}

// TestH3TwinTrailerMap: trailer values arrive in the map resp.Trailer held
// when RoundTrip returned (declared keys, nil values), as net/http fills
// it; quic-go put them in a new map, so a caller that kept the first one
// saw nil values.
func TestH3TwinTrailerMap(t *testing.T) {
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		w.Header().Set("X-Sum", "42")
	}), nil)
	tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		kept := resp.Trailer
		before := fmt.Sprint(kept)
		b, err := io.ReadAll(resp.Body)
		// (The length is not compared: net/http's server sends a body
		// with trailers chunked, quic-go's with a Content-Length.)
		same := reflect.ValueOf(resp.Trailer).UnsafePointer() == reflect.ValueOf(kept).UnsafePointer()
		return fmt.Sprintf("before EOF %s; body %q %v; after EOF %v; kept map %v; resp.Trailer still the kept map %v", before, b, err, resp.Trailer, kept, same)
	})
}

// TestH3TwinContextEnd: when the request's context ends while the response
// head is awaited or while the body is read, the error is the context's
// cause (context.Canceled for a plain cancel), as net/http returns; quic-go
// reported a body read as a stream reset (H3_REQUEST_CANCELLED) and the
// head wait as context.Canceled whatever the cause. The body phase is
// checked against that expectation, not side by side: net/http's own body
// read after the cancel reports a clean EOF about one run in twenty.
func TestH3TwinContextEnd(t *testing.T) {
	arrived := make(chan struct{}, 1)
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/body":
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
		case "/head":
		default:
			return
		}
		arrived <- struct{}{}
		<-r.Context().Done()
	}), nil)
	cause := errors.New("test: caller gave up")
	outcome := func(err error) string {
		return fmt.Sprintf("error %v; is Canceled %v; is cause %v", err, errors.Is(err, context.Canceled), errors.Is(err, cause))
	}
	for _, withCause := range []bool{false, true} {
		var c error
		want := context.Canceled
		if withCause {
			c, want = cause, cause
		}
		t.Run(fmt.Sprint("head_cause_", withCause), func(t *testing.T) {
			tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				req, err := http.NewRequestWithContext(ctx, "GET", u+"/head", nil)
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					<-arrived
					cancel(c)
				}()
				resp, err := rt.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				return outcome(err)
			})
		})
		t.Run(fmt.Sprint("body_cause_", withCause), func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			req, err := http.NewRequestWithContext(ctx, "GET", tw.url+"/body", nil)
			if err != nil {
				t.Fatal(err)
			}
			before := tw.sent.Load()
			resp, err := tw.h3.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			<-arrived
			buf := make([]byte, 5)
			if _, err := io.ReadFull(resp.Body, buf); err != nil || tw.sent.Load() == before {
				t.Fatalf("first bytes: %v; sent over HTTP/3: %v", err, tw.sent.Load() != before)
			}
			cancel(c)
			_, err = io.ReadAll(resp.Body)
			if !errors.Is(err, want) {
				t.Fatalf("body read after the context ended: %s; want %v", outcome(err), want)
			}
		})
	}
}

// TestH3IdleConnTimeout: an HTTP/3 connection left idle for
// IdleConnTimeout is closed (QUIC keep-alives would otherwise hold it open
// for ever), as net/http closes an idle TCP connection, and the UDP socket
// is released with the last connection; the next request dials a new one.
func TestH3IdleConnTimeout(t *testing.T) {
	h := &protoHandler{}
	u := startTLS(t, h)
	port, _ := startH3(t, h, nil)
	conns := make(chan *h3conn.Conn, 4)
	tr := newH3Transport(t, func(tr *Transport) {
		tr.IdleConnTimeout = 50 * time.Millisecond
		tr.h3.headStart = time.Minute
		tr.h3.beforeSend = func(c *h3conn.Conn) { conns <- c }
	})
	advertise(t, tr.altSvcCache(), u, altValue("", port))
	if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
		t.Fatalf("proto %s, want HTTP/3.0", resp.Proto)
	}
	first := <-conns
	eventually(t, "the idle HTTP/3 connection to close", func() bool { return !first.Usable() })
	// With no connection left, the UDP socket (and quic-go's goroutines
	// reading it) is released too, as net/http keeps nothing for a host
	// once its idle connections timed out.
	eventually(t, "the UDP socket to be released", func() bool {
		d := tr.h3.flights.Dialer()
		return d == nil || d.LocalAddr() == nil
	})
	if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
		t.Fatalf("proto %s after the idle close, want HTTP/3.0", resp.Proto)
	}
	if second := <-conns; second == first {
		t.Fatal("the request after the idle close used the closed connection")
	}
}

// TestH3TwinReadAfterClose: a response body read after Close fails with
// net/http's "http: read on closed response body", decoded or not; it
// returned quic-go's stream reset (H3_REQUEST_CANCELLED).
func TestH3TwinReadAfterClose(t *testing.T) {
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, strings.Repeat("x", 100000))
			zw.Close()
			return
		}
		io.WriteString(w, strings.Repeat("x", 100000))
	}), nil)
	for _, path := range []string{"/plain", "/gzip"} {
		t.Run(path[1:], func(t *testing.T) {
			tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
				req, err := http.NewRequest("GET", u+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := rt.RoundTrip(req)
				if err != nil {
					return err.Error()
				}
				buf := make([]byte, 10)
				n1, err1 := io.ReadFull(resp.Body, buf)
				cerr := resp.Body.Close()
				n2, err2 := resp.Body.Read(buf)
				return fmt.Sprintf("before Close %d %v; Close %v; after Close %d %v", n1, err1, cerr, n2, err2)
			})
		})
	}
}

// TestH3TwinUserAgent: a request without User-Agent carries Go's default
// ("Go-http-client/" and the protocol version, as net/http sends over
// HTTP/1.1 and HTTP/2), not quic-go's "quic-go HTTP/3"; an empty one sends
// none and of several the first goes, as in net/http.
func TestH3TwinUserAgent(t *testing.T) {
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua := r.Header.Values("User-Agent")
		for i, v := range ua {
			if strings.HasPrefix(v, "Go-http-client/") {
				ua[i] = "Go-http-client/(version)"
			}
		}
		fmt.Fprintf(w, "%q", ua)
	}), nil)
	for _, tc := range []struct {
		name string
		ua   []string // nil: not set
	}{
		{"unset", nil}, {"empty", []string{""}}, {"one", []string{"app/1"}}, {"two", []string{"app/1", "app/2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
				req, err := http.NewRequest("GET", u, nil)
				if err != nil {
					t.Fatal(err)
				}
				if tc.ua != nil {
					req.Header["User-Agent"] = tc.ua
				}
				return describe(rt.RoundTrip(req))
			})
		})
	}
}

// TestH3TwinContinueHookOrder: with Expect: 100-continue, the hooks fire in
// net/http's order, Got100Continue before Got1xxResponse(100); quic-go
// fired them the other way round.
// continueHookOrder describes the hooks of an Expect: 100-continue
// exchange by what both implementations fix: which hooks fired, how often,
// and that Got100Continue came before Got1xxResponse(100) and before
// WroteRequest. The rest races in net/http itself: it fires
// Wait100Continue on its writer goroutine and Got100Continue on its reader,
// and releases the body before calling Got1xxResponse(100), so the writer's
// WroteRequest can come first.
func continueHookOrder(ev []string) string {
	first := func(name string) int { return slices.Index(ev, name) }
	got100 := first("Got100Continue")
	before := func(name string) string {
		i := first(name)
		switch {
		case i < 0:
			return name + " missing"
		case got100 >= 0 && got100 < i:
			return "Got100Continue before " + name
		}
		return "Got100Continue NOT before " + name
	}
	sorted := slices.Sorted(slices.Values(ev))
	return fmt.Sprintf("hooks %s; %s; %s", strings.Join(sorted, ", "), before("Got1xxResponse 100"), before("WroteRequest"))
}

func TestH3TwinContinueHookOrder(t *testing.T) {
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/continue" {
			w.WriteHeader(http.StatusContinue)
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %s", b)
		}
	}), func(tr *http.Transport) { tr.ExpectContinueTimeout = time.Minute })
	for _, with1xx := range []bool{false, true} {
		t.Run(fmt.Sprint("got1xx_hook_", with1xx), func(t *testing.T) {
			tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
				var mu sync.Mutex // guards ev: hooks may run on other goroutines
				var ev []string
				add := func(s string) { mu.Lock(); ev = append(ev, s); mu.Unlock() }
				trace := &httptrace.ClientTrace{
					Wait100Continue: func() { add("Wait100Continue") },
					Got100Continue:  func() { add("Got100Continue") },
					WroteRequest:    func(httptrace.WroteRequestInfo) { add("WroteRequest") },
				}
				if with1xx {
					trace.Got1xxResponse = func(code int, _ textproto.MIMEHeader) error {
						add(fmt.Sprint("Got1xxResponse ", code))
						return nil
					}
				}
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "PUT", u+"/continue", strings.NewReader("late"))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Expect", "100-continue")
				s := describe(rt.RoundTrip(req))
				mu.Lock()
				defer mu.Unlock()
				return s + "; " + continueHookOrder(ev)
			})
		})
	}
}
