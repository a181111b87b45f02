package transport

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The HTTP/1.1 client connection against net/http, row by row: request
// heads, response parsing and limits, framing without a body, chunked
// bodies and trailers, 100-continue, early answers, streaming bodies,
// reuse, gzip, upgrades and other edges. Unusual-but-legal and
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

// Response heads read as net/http reads them: a folded field needs its
// colon on the first line, and every head, 1xx and 101 included, goes
// through the framing checks and clean-up.
var h1ParseRows = []scenario{
	{name: "parse/fold-continues-line-without-colon", raw: rawRespond("HTTP/1.1 200 OK\r\nX-Folded\r\n : a\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "parse/fold-after-empty-value", raw: rawRespond("HTTP/1.1 200 OK\r\nX-Folded:\r\n a\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "parse/1xx-bad-content-length", raw: rawRespond("HTTP/1.1 103 Early Hints\r\nContent-Length: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "parse/1xx-unsupported-transfer-encoding", raw: rawRespond("HTTP/1.1 103 Early Hints\r\nTransfer-Encoding: gzip\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "parse/101-switch-conflicting-content-length", raw: rawRespond("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), run: one("GET", "/", nil, func(r *http.Request) {
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "echo")
	})},
	{name: "parse/http10-keep-alive-reused", raw: rawRespond(
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
}

func TestH1ResponseParsing(t *testing.T) {
	runH1Rows(t, h1ParseRows)
}

// TestH1Got1xxHeader: Got1xxResponse sees a 1xx header cleaned up as
// net/http cleans every head (Pragma: no-cache implies Cache-Control,
// Transfer-Encoding and Connection: close removed).
func TestH1Got1xxHeader(t *testing.T) {
	var got [2]textproto.MIMEHeader
	for i, rt := range []http.RoundTripper{settings{}.nethttp(nil), settings{}.ferry(nil)} {
		srv := startRawServer(t, rawRespond("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nPragma: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		req := newReq(t, "GET", srv.URL, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				got[i] = h
				return nil
			},
		}))
		if o := observe(rt, req); o.Err != "" || o.Body != "ok" {
			t.Fatalf("%+v", o)
		}
		closeIdle(rt)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("1xx header\nnet/http: %v\nferry:    %v", got[0], got[1])
	}
}

// Header limits and timeouts across 1xx heads: without a Got1xxResponse
// hook every head counts against one MaxResponseHeaderBytes budget (net/http
// counts the bytes it read), and the error names the configured limit;
// ResponseHeaderTimeout covers the 1xx heads and the final one together.
var h1LimitRows = []scenario{
	{name: "limits/1xx-six-times", raw: rawRespond(strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 6) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "limits/1xx-over-header-limit", set: settings{MaxResponseHeaderBytes: 300}, raw: rawRespond(strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 10) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "limits/header-timeout-after-1xx", set: settings{ResponseHeaderTimeout: 100 * time.Millisecond}, raw: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
		<-c.s.close
	}, run: gets(1, "/")},
}

func TestH1ResponseLimits(t *testing.T) {
	runH1Rows(t, h1LimitRows)
}

// HTTP/1.1 request framing and header limits whose handling lies outside
// the HTTP/1.1 connection (request planning, settings): a test still
// skipped names the reason and fails when the skip is removed.

// A caller-set Transfer-Encoding: chunked on a request without a body.
// net/http sends nothing (nil Body: no framing header at all; for a POST a
// "Content-Length: 0") or, with http.NoBody, an empty chunked body; ferry
// announced a chunked body and sent none, so the server waited for it
// (fixed in Transport.plan).
var h1ChunkedNoBodyRows = []scenario{
	{name: "te-chunked-nil-body-get", handler: hello, run: h1Bounded(one("GET", "/", nil, func(r *http.Request) { r.TransferEncoding = []string{"chunked"} }))},
	{name: "te-chunked-nil-body-post", handler: hello, run: h1Bounded(one("POST", "/", nil, func(r *http.Request) { r.TransferEncoding = []string{"chunked"} }))},
	{name: "te-chunked-nobody-post", handler: hello, run: h1Bounded(one("POST", "/", nil, func(r *http.Request) {
		r.Body = http.NoBody
		r.TransferEncoding = []string{"chunked"}
	}))},
	{name: "te-chunked-nobody-post-trailer", handler: hello, run: h1Bounded(one("POST", "/", nil, func(r *http.Request) {
		r.Body = http.NoBody
		r.TransferEncoding = []string{"chunked"}
		r.Trailer = http.Header{"X-Sum": {"0"}}
	}))},
}

// h1Bounded gives f's requests at most 10 s (a hang shows as a
// deadline error in the observation).
func h1Bounded(f func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		ctx := h1BoundedCtx(t)
		return f(t, roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return rt.RoundTrip(r.WithContext(ctx))
		}), srv)
	}
}

func TestH1ChunkedWithoutBody(t *testing.T) {
	runH1Rows(t, h1ChunkedNoBodyRows)
}

// TestH1NegativeHeaderLimit: a negative MaxResponseHeaderBytes means
// the default (10 MiB) in net/http, whose maxHeaderResponseSize takes only
// a positive value; ferry's Transport.maxHeaderBytes (transport.go) takes
// any non-zero value, so every response fails with "server response
// headers exceeded -1 bytes".
func TestH1NegativeHeaderLimit(t *testing.T) {
	runH1Rows(t, []scenario{
		{name: "negative-header-limit", set: settings{MaxResponseHeaderBytes: -1}, raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	})
}

// Chunk-size lines as net/http reads them: CRLF only, no other CR, under
// 4 KiB, and the framing overhead charged exactly as net/http charges it
// (a one-byte chunk may spend 16 bytes on its size line without limit).
var h1ChunkedRows = []scenario{
	{name: "chunked/size-line-bare-lf", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/size-line-inner-cr", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\r\nabc\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/last-chunk-bare-lf", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\n\r\n"), run: gets(1, "/")},
	{name: "chunked/size-line-trailing-space", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3 \t\r\nabc\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/overhead-at-allowance", raw: rawRespond(h1ManyTinyChunks(9000, 15)), run: h1BodyLen(gets(1, "/"))},
	{name: "chunked/overhead-over-allowance", raw: rawRespond(h1ManyTinyChunks(20000, 16)), run: h1BodyLen(gets(1, "/"))},
	{name: "chunked/size-line-4094", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + strings.Repeat("e", 4092) + "\r\nx\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/size-line-4096", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + strings.Repeat("e", 4094) + "\r\nx\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/size-line-cut-short", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0"), run: gets(1, "/")},
}

func TestH1ChunkedResponses(t *testing.T) {
	runH1Rows(t, h1ChunkedRows)
}

// A chunked body cut short in its trailer section fails with net/http's
// errors (which are not io.ErrUnexpectedEOF).
var h1TrailerRows = []scenario{
	{name: "trailer/cut-in-section", raw: rawRespondClose("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-A: 1\r\n"), run: gets(1, "/")},
	{name: "trailer/cut-after-last-chunk", raw: rawRespondClose("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"), run: gets(1, "/")},
	{name: "trailer/cut-one-byte-in", raw: rawRespondClose("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX"), run: gets(1, "/")},
	{name: "trailer/cut-after-cr", raw: rawRespondClose("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r"), run: gets(1, "/")},
}

func TestH1Trailers(t *testing.T) {
	runH1Rows(t, h1TrailerRows)
}

// "Expect: 100-continue" on a request whose body is http.NoBody: net/http
// waits for the 100 (or the answer) all the same, with Wait100Continue, and
// reports WroteRequest once the answer let the (empty) body go.
var h1ContinueRows = []scenario{
	{name: "continue/nobody", set: settings{ExpectContinueTimeout: time.Minute}, handler: hello,
		run: tracedLanes(h1ContinueLanes, []string{
			"GetConn", "ConnectStart", "ConnectDone(false)", "GotConn(reused=false,wasIdle=false)",
			"WroteHeaderField(Host=HOST)", "WroteHeaderField(User-Agent=Go-http-client/1.1)",
			"WroteHeaderField(Content-Length=0)", "WroteHeaderField(Expect=100-continue)",
			"WroteHeaderField(Accept-Encoding=gzip)", "WroteHeaders", "Wait100Continue",
			"GotFirstResponseByte", "WroteRequest(false)", "PutIdleConn(<nil>)",
		}, nil, one("POST", "/", nil, func(r *http.Request) {
			r.Body = http.NoBody
			r.Header.Set("Expect", "100-continue")
		}))},
	{name: "continue/nobody-answered-100", set: settings{ExpectContinueTimeout: time.Minute}, raw: func(c *rawConn) {
		c.readRequest()
		c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		<-c.s.close
	}, run: tracedLanes(h1ContinueLanes, []string{
		"GetConn", "ConnectStart", "ConnectDone(false)", "GotConn(reused=false,wasIdle=false)",
		"WroteHeaderField(Host=HOST)", "WroteHeaderField(User-Agent=Go-http-client/1.1)",
		"WroteHeaderField(Content-Length=0)", "WroteHeaderField(Expect=100-continue)",
		"WroteHeaderField(Accept-Encoding=gzip)", "WroteHeaders", "Wait100Continue",
		"GotFirstResponseByte", "Got100Continue", "Got1xx(100)", "WroteRequest(false)", "PutIdleConn(<nil>)",
	}, nil, one("POST", "/", nil, func(r *http.Request) {
		r.Body = http.NoBody
		r.Header.Set("Expect", "100-continue")
	}))},
}

func TestH1ExpectContinue(t *testing.T) {
	runH1Rows(t, h1ContinueRows)
}

// An answer before the request body was read: the server reads the head
// only, answers 413 and leaves the connection open without reading (so
// the client's body write stalls once the socket buffers are full, and
// never fails on its own). The answer is returned; the connection, whose
// request was not sent whole, is not reused.
var h1EarlyRows = []scenario{
	{name: "early/413-before-body", raw: func(c *rawConn) {
		tp := textproto.NewReader(c.br)
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		h, _ := tp.ReadMIMEHeader()
		h.Del("Host") // its port differs per server
		method, uri, _ := strings.Cut(line, " ")
		uri, _, _ = strings.Cut(uri, " ")
		c.s.record(seenRequest{Method: method, URI: uri, Header: http.Header(h)})
		io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
		<-c.s.close
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "POST", srv.URL, &streamBody{strings.NewReader(big)}).WithContext(h1BoundedCtx(t))
		return []any{observe(rt, req)}
	}},
}

func TestH1EarlyAnswer(t *testing.T) {
	runH1Rows(t, h1EarlyRows)
}

// A streaming request body (written by its own goroutine while the
// response is awaited) that fails on the caller's side: a length that
// differs from ContentLength, or a Close error. The server then waits for
// the rest of the body; the request must end with net/http's error
// instead of waiting with it.

// TestH1StreamBodyShort: a streaming body shorter than its
// ContentLength fails the request with net/http's error. Only the client's
// view is compared: both have sent what the body gave, and the server may
// or may not have read it by the time the comparison is made.
func TestH1StreamBodyShort(t *testing.T) {
	var got [2]any
	for i, rt := range []http.RoundTripper{settings{}.nethttp(nil), settings{}.ferry(nil)} {
		srv := startHandlerServer(t, hello, false, nil)
		got[i] = h1StreamPost("abc", 5, nil)(t, rt, srv)[0]
		closeIdle(rt)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("net/http: %+v\nferry:    %+v", got[0], got[1])
	}
}

// TestH1StreamBodyFailure: failures after which the server may
// have had the whole declared body, so that net/http returns either its
// answer or the error (a race between its writer and its reader), checked
// for ferry only against a server that never answers, which must not be
// waited for: a body longer than its ContentLength, and a body whose Close
// fails. The errors are net/http's texts.
func TestH1StreamBodyFailure(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		closeErr   error
		want       string
	}{
		{"longer-than-length", "abcdefgh", nil, "http: ContentLength=5 with Body length 8"},
		{"close-error", "abcde", errors.New("close failed"), "close failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRawServer(t, func(c *rawConn) {
				c.readRequest()
				<-c.s.close
			})
			tr := settings{}.ferry(nil)
			defer closeIdle(tr)
			o := h1StreamPost(tc.body, 5, tc.closeErr)(t, tr, srv)[0].(observation)
			if want := "error: net/http: HTTP/1.x transport connection broken: " + tc.want; o.Err != want {
				t.Errorf("got %q, want %q", o.Err, want)
			}
		})
	}
}

// A request body that streams (a pipe the caller feeds while the exchange
// runs): net/http sends the head at once and each piece of the body as the
// body yields it (each chunk, or each read of a body with a declared
// length), so a server that answers after the first piece (a
// bidirectional stream, an upload the server acknowledges as it goes)
// gets it. The body stays open until the answer came back.
func TestH1StreamingBodyFlushed(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		for _, declared := range []int64{-1, 8} {
			for _, impl := range []string{"nethttp", "ferry"} {
				name := impl + "/" + h1Framing(declared)
				if useTLS {
					name += "/tls"
				}
				t.Run(name, func(t *testing.T) {
					srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						// Answer before the body ended (the server otherwise
						// reads the rest of the body before the answer).
						http.NewResponseController(w).EnableFullDuplex()
						buf := make([]byte, 4)
						io.ReadFull(r.Body, buf)
						w.Header().Set("X-First", string(buf))
						w.WriteHeader(200)
						w.(http.Flusher).Flush()
						io.Copy(w, r.Body)
					}))
					var tlsCfg *tls.Config
					if useTLS {
						srv.StartTLS()
						tlsCfg = srv.Client().Transport.(*http.Transport).TLSClientConfig
					} else {
						srv.Start()
					}
					defer srv.Close()
					rt := settings{}.nethttp(tlsCfg)
					if impl == "ferry" {
						rt = settings{}.ferry(tlsCfg)
					}
					defer closeIdle(rt)
					pr, pw := io.Pipe()
					defer pw.Close() // net/http waits for its writer before it returns an error
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, pr)
					req.ContentLength = declared
					go pw.Write([]byte("ping"))
					resp, err := rt.RoundTrip(req)
					if err != nil {
						pw.Close()
						t.Fatalf("the answer to the first piece never came: %v", err)
					}
					defer resp.Body.Close()
					if got := resp.Header.Get("X-First"); got != "ping" {
						t.Errorf("X-First %q", got)
					}
					go func() { pw.Write([]byte("pong")); pw.Close() }()
					rest, err := io.ReadAll(resp.Body)
					if string(rest) != "pong" || err != nil {
						t.Errorf("rest %q %v", rest, err)
					}
					if resp.ProtoMajor != 1 {
						t.Errorf("protocol %s, want HTTP/1.1", resp.Proto)
					}
				})
			}
		}
	}
}

// h1Framing names the request framing a declared length gives.
func h1Framing(declared int64) string {
	if declared < 0 {
		return "chunked"
	}
	return "content-length"
}

// Connection reuse after answers net/http does not reuse a connection
// after: a final status below 200, and bytes beyond the end of the
// response, which must never be read as the answer to the next request.
var h1ReuseRows = []scenario{
	{name: "reuse/status-below-100", raw: rawRespond(
		"HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "reuse/101-without-upgrade", raw: rawRespond(
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	// net/http notices the extra bytes on the idle connection and closes
	// it (logging "Unsolicited response"); the rows wait for that before
	// the second request, so they compare outcomes, not that race.
	{name: "reuse/head-with-body-bytes", raw: rawRespond(
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1Settled(one("HEAD", "/", nil, nil))},
	{name: "reuse/204-with-body-bytes", raw: rawRespond(
		"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfake!",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1Settled(gets(1, "/"))},
	{name: "reuse/bytes-after-content-length", raw: rawRespond(
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1Settled(gets(1, "/"))},
	{name: "reuse/bytes-after-chunked", raw: rawRespond(
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nEXTRA",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1Settled(gets(1, "/"))},
}

func TestH1ConnReuse(t *testing.T) {
	// net/http logs the unsolicited bytes through the standard logger.
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	runH1Rows(t, h1ReuseRows)
}

// TestH1GzipConcurrentRead: two Reads at once of a transparently
// decompressed body: net/http's second Read fails with "http: concurrent
// read on response body" instead of sharing the decoder (which would be a
// data race). The server sends the gzip header and one flushed block, then
// waits: the first Read to reach the decoder blocks there, and the other
// must fail at once, whichever of the two comes first.
func TestH1GzipConcurrentRead(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("hello"))
	zw.Flush()
	first := gz.Len()
	zw.Write([]byte(" world"))
	zw.Close()
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			release := make(chan struct{})
			srv := startRawServer(t, func(c *rawConn) {
				c.readRequest()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: "+strconv.Itoa(gz.Len())+"\r\n\r\n")
				c.Write(gz.Bytes()[:first])
				<-release
				c.Write(gz.Bytes()[first:])
			})
			rt := settings{}.nethttp(nil)
			if impl == "ferry" {
				rt = settings{}.ferry(nil)
			}
			defer closeIdle(rt)
			resp, err := rt.RoundTrip(newReq(t, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 5)
			if n, err := io.ReadFull(resp.Body, buf); n != 5 || err != nil {
				t.Fatalf("first read: %d %v", n, err)
			}
			type result struct {
				b   []byte
				err error
			}
			results := make(chan result, 2)
			for i := 0; i < 2; i++ {
				go func() {
					p := make([]byte, 64)
					n, err := resp.Body.Read(p)
					results <- result{p[:n], err}
				}()
			}
			select {
			case r := <-results:
				if r.err == nil || r.err.Error() != "http: concurrent read on response body" {
					t.Errorf("the Read that came second returned %q, %v", r.b, r.err)
				}
			case <-time.After(time.Minute):
				t.Error("neither Read returned") // hang guard
			}
			close(release)
			if r := <-results; r.err != nil && r.err != io.EOF || len(r.b) == 0 {
				t.Errorf("the blocked Read returned %q, %v", r.b, r.err)
			}
		})
	}
}

// TestH1UpgradeCloseWrite: the body of a 101 Switching Protocols
// response can half-close the connection, as net/http's can (tunnels and
// Docker-style hijacked streams signal the end of their input this way):
// the server reads EOF and still answers.
func TestH1UpgradeCloseWrite(t *testing.T) {
	var got [2][]any
	for i, rt := range []http.RoundTripper{settings{}.nethttp(nil), settings{}.ferry(nil)} {
		srv := startRawServer(t, func(c *rawConn) {
			c.readRequest()
			// A hang guard, no timing assertion: a CloseWrite that does
			// nothing fails the comparison instead of hanging the test.
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			in, err := io.ReadAll(c.br) // until the client's CloseWrite
			fmt.Fprintf(c, "got %q %v", in, err)
		})
		req := newReq(t, "GET", srv.URL, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		cw, ok := resp.Body.(interface{ CloseWrite() error })
		if !ok {
			got[i] = []any{fmt.Sprintf("%T has no CloseWrite", resp.Body)}
			resp.Body.Close()
			continue
		}
		resp.Body.(io.Writer).Write([]byte("ping"))
		cwErr := cw.CloseWrite()
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		got[i] = []any{cwErr, string(answer), err}
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("net/http: %v\nferry:    %v", got[0], got[1])
	}
}

// Unusual but legal requests and responses the main table does not cover,
// each matching net/http: request
// targets (opaque, "*", CONNECT, fragment, forced query, user info that a
// RoundTripper does not send), framing the caller chose, header values with
// spaces; responses with odd versions and statuses, header lines at the
// edge of the syntax, HTTP/1.0 chunking, HEAD with chunking, a
// Got1xxResponse hook that fails, and gzip bodies that are corrupt or cut
// short (their errors, and whether the connection serves the next request).
var h1MiscRows = []scenario{
	{name: "request/te-identity-post", handler: hello, run: one("POST", "/", func() io.Reader { return strings.NewReader("abc") }, func(r *http.Request) { r.TransferEncoding = []string{"identity"} })},
	{name: "request/host-ipv6-zone", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: one("GET", "/", nil, func(r *http.Request) { r.Host = "[fe80::1%eth0]:8080" })},
	{name: "request/opaque-absolute", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1HostInURI(func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "GET", srv.URL, nil)
		req.URL.Opaque = "//" + req.URL.Host + "/a%2Fb"
		return []any{observe(rt, req)}
	})},
	{name: "request/options-star", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "OPTIONS", srv.URL, nil)
		req.URL.Opaque = "*"
		return []any{observe(rt, req)}
	}},
	{name: "request/connect-direct", raw: rawRespond("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1HostInURI(func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "CONNECT", srv.URL, nil)
		return []any{observe(rt, req), observe(rt, newReq(t, "GET", srv.URL, nil))}
	})},
	{name: "request/fragment-and-force-query", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		return []any{observe(rt, newReq(t, "GET", srv.URL+"/p?q=1#frag", nil)), observe(rt, newReq(t, "GET", srv.URL+"/p?", nil))}
	}},
	{name: "request/userinfo-not-sent", handler: hello, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		return []any{observe(rt, newReq(t, "GET", "http://user:pass@"+strings.TrimPrefix(srv.URL, "http://")+"/", nil))}
	}},
	{name: "response/got1xx-hook-error", raw: rawRespond("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "GET", srv.URL, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(int, textproto.MIMEHeader) error { return errors.New("no hints") },
		}))
		return []any{observe(rt, req), observe(rt, newReq(t, "GET", srv.URL, nil))}
	}},
	{name: "request/get-with-body", handler: hello, run: one("GET", "/", func() io.Reader { return strings.NewReader("abc") }, nil)},
	{name: "request/header-value-spaces", handler: hello, run: one("GET", "/", nil, func(r *http.Request) { r.Header["X-A"] = []string{"  v  ", "\tw"} })},
	{name: "response/head-chunked", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 7\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		return []any{observe(rt, newReq(t, "HEAD", srv.URL, nil)), observe(rt, newReq(t, "GET", srv.URL, nil))}
	}},
	{name: "response/gzip-corrupt", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\n0123456789", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/gzip-truncated", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Encoding: GZIP\r\nContent-Length: 12\r\n\r\n"+string(gzipped("hello world")[:12]), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/cl-plus", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/status-999-blank-reason", raw: rawRespond("HTTP/1.1 999 \r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/http2-version-line", raw: rawRespond("HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/http09-version", raw: rawRespond("HTTP/0.9 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/http10-chunked-ignored", raw: rawRespondClose("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "response/connection-close-and-keep-alive", raw: rawRespond("HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/empty-header-value-and-space-key", raw: rawRespond("HTTP/1.1 200 OK\r\nX-Empty:\r\nX-Sp : v\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/header-value-ctl", raw: rawRespond("HTTP/1.1 200 OK\r\nX-C: a\x01b\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/header-value-obs-text", raw: rawRespond("HTTP/1.1 200 OK\r\nX-C: caf\xe9\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/head-cut-before-blank-line", raw: rawRespondClose("HTTP/1.1 200 OK\r\nX-A: b\r\n"), run: gets(1, "/")},
	{name: "response/blank-line-before-status", raw: rawRespond("\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/first-header-line-indented", raw: rawRespond("HTTP/1.1 200 OK\r\n X-A: b\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
}

// h1HostInURI runs f and writes HOST for the server's address in the
// request targets the server saw (each transport has its own server).
func h1HostInURI(f func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		out := f(t, rt, srv)
		host := strings.TrimPrefix(srv.URL, "http://")
		srv.mu.Lock()
		for i := range srv.seen {
			srv.seen[i].URI = strings.ReplaceAll(srv.seen[i].URI, host, "HOST")
		}
		srv.mu.Unlock()
		return out
	}
}

func TestH1WireEdgeCases(t *testing.T) {
	runH1Rows(t, h1MiscRows)
}
