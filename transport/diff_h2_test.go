package transport

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// The differential table's rows again over HTTP/2 on TLS (h2 by ALPN,
// ForceAttemptHTTP2 on both clients): every row of TestDifferential with a
// handler server, and the rows that need a silent or stalling server,
// which there use a raw HTTP/1.1 script, with a handler instead. Each
// runs against net/http and ferry, each with its own fresh server; what
// the client and the server saw and the connections must match, and the
// server must have read every request over HTTP/2.0.

// h2DiffSkip names the handler rows of the table that have no HTTP/2
// form, and why.
var h2DiffSkip = map[string]string{
	// Their expected traces (h1ContinueLanes, continueTrace) are HTTP/1.1
	// hook orders; HTTP/2 100-continue is in h2_test.go and
	// h2_frames_test.go.
	"1xx/continue-accepted": "HTTP/1.1 hook order",
	"1xx/continue-rejected": "HTTP/1.1 hook order",
	// traced compares exact event sequences; over HTTP/2 the writer's and
	// the reader's hooks race in net/http (h2TraceLanes); tracing over
	// HTTP/2 is the h2 table's tracing/get-twice.
	"tracing/get-twice": "hooks race over HTTP/2",
	"tracing/post":      "hooks race over HTTP/2",
	"tracing/tls":       "hooks race over HTTP/2",
	// Differs from net/http today, not a CHANGELOG known issue: over
	// HTTP/2 net/http sends a GET with ContentLength 5 and a nil Body
	// (without a body) and gets its answer; ferry refuses it before
	// dialing, as net/http's HTTP/1.1 does ("http: Request.ContentLength=5
	// with nil Body"), on every protocol.
	"validation/content-length-nil-body": "ferry refuses it on every protocol; net/http only over HTTP/1.1",
}

// h2DiffRows derives the HTTP/2 rows from the table.
func h2DiffRows() []scenario {
	var rows []scenario
	for _, sc := range scenarios {
		if sc.raw != nil || h2DiffSkip[sc.name] != "" {
			continue
		}
		sc.name = "h2/" + sc.name
		sc.h2 = true
		rows = append(rows, sc)
	}
	return append(rows, h2DiffStallRows...)
}

// h2DiffStall answers nothing until the request is cancelled or the
// server closes.
func h2DiffStall(w http.ResponseWriter, r *http.Request) {
	<-r.Context().Done()
}

// h2DiffPartial sends the head of a 100-byte response and 7 bytes of it,
// then stalls.
func h2DiffPartial(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", "100")
	io.WriteString(w, "partial")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// h2DiffStallRows are the table's stalling rows with a handler. The
// table's limits/header-too-large has no row here: with one 5,000-byte
// field against MaxResponseHeaderBytes 1000, on Go 1.26 net/http fails the
// connection with PROTOCOL_ERROR (its frame reader's header-list budget)
// and ferry with COMPRESSION_ERROR (x/net's reader, which budgets
// headers and trailers together, lets the frame through to the hpack
// string limit); on Go 1.27 both say PROTOCOL_ERROR.
var h2DiffStallRows = []scenario{
	{name: "h2/limits/response-header-timeout", h2: true, set: settings{ResponseHeaderTimeout: 50 * time.Millisecond},
		handler: h2DiffStall, run: gets(1, "/")},
	{name: "h2/cancel/context-while-waiting", h2: true, handler: h2DiffStall, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		ctx, cancel := context.WithCancel(context.Background())
		go afterServerSaw(srv, 1, cancel)
		return []any{observe(rt, newReq(t, "GET", srv.URL, nil).WithContext(ctx))}
	}},
	{name: "h2/cancel/deadline-during-body", h2: true, handler: h2DiffPartial, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return []any{observe(rt, newReq(t, "GET", srv.URL, nil).WithContext(ctx))}
	}},
	{name: "h2/cancel/legacy-cancel-channel", h2: true, handler: h2DiffStall, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "GET", srv.URL, nil)
		ch := make(chan struct{})
		req.Cancel = ch
		go afterServerSaw(srv, 1, func() { close(ch) })
		return []any{observe(rt, req)}
	}},
}

// afterServerSaw runs f once srv has seen n requests (or, as a hang guard
// only, after 10 s): a cancellation that must find the request waiting at
// the server, whatever the machine's speed.
func afterServerSaw(srv *testServer, n int, f func()) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		srv.mu.Lock()
		seen := len(srv.seen)
		srv.mu.Unlock()
		if seen >= n {
			break
		}
	}
	f()
}

func TestDifferentialH2(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	runDiffRows(t, h2DiffRows(), cert)
}
