package transport

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Rows for the HTTP/1.1 client connection: unusual-but-legal and
// hostile inputs the main differential table (diff_test.go) does not
// cover. Each row runs against net/http and against ferry, each with its
// own fresh server, and what the client and the server saw must match.

// runH1Rows runs rows as TestDifferential runs its table (none uses
// TLS).
func runH1Rows(t *testing.T, rows []scenario) {
	runDiffRows(t, rows, nil)
}

// h1BoundedCtx is a request context that ends a request hanging on a
// defect after 10 s (the observation then shows a deadline error).
func h1BoundedCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// h1Settled does request first, waits until net/http closed the
// connection it used (ferry closes synchronously or not at all), then does
// a second GET: it compares whether a connection with bytes left over
// after a response is reused.
func h1Settled(first func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		w := watchClientCloses(rt)
		out := first(t, rt, srv)
		w.await(t, 1)
		return append(out, observe(rt, newReq(t, "GET", srv.URL+"/second", nil)))
	}
}

// h1Body is a streaming request body (no GetBody, not a known
// in-memory type) with its own Close error.
type h1Body struct {
	r        io.Reader
	closeErr error
}

func (b *h1Body) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *h1Body) Close() error               { return b.closeErr }

// h1StreamPost posts body (a streaming body declaring length cl).
func h1StreamPost(body string, cl int64, closeErr error) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "POST", srv.URL, nil).WithContext(h1BoundedCtx(t))
		req.Body = &h1Body{r: strings.NewReader(body), closeErr: closeErr}
		req.ContentLength = cl
		return []any{observe(rt, req)}
	}
}

// h1ManyTinyChunks is a chunked response of n one-byte chunks whose
// size lines carry an extension of ext bytes.
func h1ManyTinyChunks(n, ext int) string {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	line := "1;" + strings.Repeat("e", ext-1) + "\r\nx\r\n"
	for i := 0; i < n; i++ {
		b.WriteString(line)
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

var h1RequestRows = []scenario{
	{name: "request/trailer-with-content-length", handler: hello, run: one("POST", "/", func() io.Reader { return strings.NewReader("abc") }, func(r *http.Request) {
		r.Trailer = http.Header{"X-T": nil}
	})},
	{name: "request/trailer-without-body", handler: hello, run: one("GET", "/", nil, func(r *http.Request) {
		r.Trailer = http.Header{"X-T": nil}
	})},
	{name: "request/user-agent-blank", handler: hello, run: one("GET", "/", nil, func(r *http.Request) {
		r.Header["User-Agent"] = []string{" "}
	})},
	{name: "request/close-with-caller-connection-header", handler: hello, run: one("GET", "/", nil, func(r *http.Request) {
		r.Close = true
		r.Header["Connection"] = []string{"keep-alive", "close"}
	})},
}

func TestH1RequestHead(t *testing.T) {
	runH1Rows(t, h1RequestRows)
}

// h1BodyLen replaces each observed body by its length.
func h1BodyLen(f func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		out := f(t, rt, srv)
		for i, o := range out {
			if ob, ok := o.(observation); ok {
				ob.Body = fmt.Sprint(len(ob.Body))
				out[i] = ob
			}
		}
		return out
	}
}

// TestH1TrailerTraceKeys: WroteHeaderField reports the announced
// trailer keys as separate values, as net/http does (the wire carries them
// joined with commas).
func TestH1TrailerTraceKeys(t *testing.T) {
	var got [2][]string
	for i, rt := range []http.RoundTripper{settings{}.nethttp(nil), settings{}.ferry(nil)} {
		srv := startHandlerServer(t, hello, false, nil)
		req := newReq(t, "POST", srv.URL, &streamBody{strings.NewReader("abc")})
		req.Trailer = http.Header{"X-B": {"2"}, "X-A": {"1"}}
		var vals []string
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteHeaderField: func(k string, v []string) {
				if k == "Trailer" {
					vals = append([]string(nil), v...)
				}
			},
		}))
		o := observe(rt, req)
		if o.Err != "" {
			t.Fatal(o.Err)
		}
		closeIdle(rt)
		got[i] = vals
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("Trailer field traced as %q by net/http, %q by ferry", got[0], got[1])
	}
}
