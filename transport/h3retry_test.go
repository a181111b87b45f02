package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/ferryhttp/ferry/internal/h3conn"
)

// rejectingHandler resets every request's stream with H3_REQUEST_REJECTED
// before reading or answering anything, as a server that will not process
// it (RFC 9114 section 8.1), and counts them.
type rejectingHandler struct{ n atomic.Int32 }

func (h *rejectingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.n.Add(1)
	str, err := w.(http3.HTTPStreamer).HTTPStream()
	if err != nil {
		panic(err)
	}
	str.CancelRead(quic.StreamErrorCode(http3.ErrCodeRequestRejected))
	str.CancelWrite(quic.StreamErrorCode(http3.ErrCodeRequestRejected))
}

// onceReader is a request body that cannot be rewound (no GetBody is set
// for it) and records Close.
type onceReader struct {
	r      io.Reader
	closed atomic.Bool
}

func (b *onceReader) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *onceReader) Close() error               { b.closed.Store(true); return nil }

// newRetryRequest builds a request to u with rec's hooks.
func newRetryRequest(t *testing.T, method, u string, body io.Reader, rec *hookRecorder) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), rec.trace()), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// countPrefix counts the lines that start with p.
func countPrefix(lines []string, p string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, p) {
			n++
		}
	}
	return n
}

// TestH3RetryRejected: the HTTP/3 server refuses every request with
// H3_REQUEST_REJECTED. A request whose body can be produced again is sent
// over TCP instead, whatever its method (the server guarantees it did not
// process it), with its body rewound; GetConn fires again for that new
// attempt. A POST whose body cannot be rewound fails with an error that
// says so, its body closed, and never reaches TCP.
func TestH3RetryRejected(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		body     func() io.Reader
		header   string // Idempotency-Key, if set
		wantBody string // TCP echo; "" means the request must fail
	}{
		{name: "get", method: "GET", wantBody: "HTTP/1.1 "},
		{name: "post_with_getbody", method: "POST", body: func() io.Reader { return strings.NewReader("payload") }, wantBody: "HTTP/1.1 payload"},
		{name: "post_idempotency_key", method: "POST", header: "k1", body: func() io.Reader { return strings.NewReader("keyed") }, wantBody: "HTTP/1.1 keyed"},
		{name: "post_without_getbody", method: "POST", body: func() io.Reader { return &onceReader{r: strings.NewReader("once")} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rej := &rejectingHandler{}
			port, _ := startH3(t, rej, nil)
			tcp := &protoHandler{}
			u := startTLS(t, tcp)
			tr := newH3Transport(t, func(tr *Transport) { tr.h3.headStart = time.Minute })
			advertise(t, tr.altSvcCache(), u, altValue("", port))

			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			rec := &hookRecorder{}
			req := newRetryRequest(t, tc.method, u, body, rec)
			if tc.header != "" {
				req.Header.Set("Idempotency-Key", tc.header)
			}
			resp, err := tr.RoundTrip(req)
			if rej.n.Load() != 1 {
				t.Fatalf("the HTTP/3 server saw %d requests, want 1", rej.n.Load())
			}
			if tc.wantBody == "" {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("a refused request without GetBody succeeded over %s", resp.Proto)
				}
				if !h3conn.IsRetryable(err) || !strings.Contains(err.Error(), "cannot be rewound") {
					t.Fatalf("error %q: want one saying the body cannot be rewound, wrapping the refusal", err)
				}
				var h3err *http3.Error
				if !errors.As(err, &h3err) || h3err.ErrorCode != http3.ErrCodeRequestRejected {
					t.Fatalf("error %v does not keep the H3_REQUEST_REJECTED cause", err)
				}
				if !body.(*onceReader).closed.Load() {
					t.Fatal("request body not closed")
				}
				if n := tcp.count(); n != 0 {
					t.Fatalf("%d requests reached TCP, want none", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused request not retried: %v", err)
			}
			got, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr != nil || resp.Proto != "HTTP/1.1" || string(got) != tc.wantBody {
				t.Fatalf("retry: %s %q %v, want HTTP/1.1 %q", resp.Proto, got, rerr, tc.wantBody)
			}
			lines := rec.lines()
			if countPrefix(lines, "GetConn") != 2 || countPrefix(lines, "GotConn udp") != 1 || countPrefix(lines, "GotConn tcp") != 1 {
				t.Fatalf("hooks %v: want GetConn and GotConn once for the HTTP/3 attempt and once for TCP", lines)
			}
		})
	}
}

// TestH3RetryUnsent: a request that got an HTTP/3 connection from the pool
// but could not open a stream on it (the connection went away, or a GOAWAY
// came while it waited for stream credit) was not sent at all; it goes over
// TCP unchanged, even a POST whose body cannot be rewound.
func TestH3RetryUnsent(t *testing.T) {
	for _, tc := range []struct {
		name string
		// spoil runs when the request is about to be sent on conn and makes
		// that connection unable to open its stream.
		spoil func(t *testing.T, srv *http3.Server, conn *h3conn.Conn, held func())
		hold  bool // keep a request in flight on the connection first
	}{
		{
			name: "peer_closed",
			spoil: func(t *testing.T, srv *http3.Server, conn *h3conn.Conn, _ func()) {
				srv.Close()
				eventually(t, "the client to see the close", func() bool { return !conn.Usable() })
			},
		},
		{
			// The server allows one stream at a time, which the held
			// request uses: the request waits in quic-go for stream credit
			// when the GOAWAY arrives, or finds the GOAWAY already there.
			name: "goaway_while_waiting_for_a_stream",
			hold: true,
			spoil: func(t *testing.T, srv *http3.Server, _ *h3conn.Conn, _ func()) {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					srv.Shutdown(ctx)
				}()
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var releaseOnce sync.Once
			releaseHeld := func() { releaseOnce.Do(func() { close(release) }) }
			defer releaseHeld()
			var paths pathLog
			h3seen := &protoHandler{extra: func(w http.ResponseWriter, r *http.Request) bool {
				paths.add(r.URL.Path)
				if r.URL.Path == "/hold" {
					<-release
				}
				return false
			}}
			srv, port := startH3Config(t, h3seen, &quic.Config{MaxIncomingStreams: 1})
			tcp := &protoHandler{}
			u := startTLS(t, tcp)
			var spoilNext atomic.Bool
			var spoiled atomic.Int32
			tr := newH3Transport(t, func(tr *Transport) {
				tr.h3.headStart = time.Minute
				tr.h3.beforeSend = func(c *h3conn.Conn) {
					if spoilNext.CompareAndSwap(true, false) {
						tc.spoil(t, srv, c, releaseHeld)
						spoiled.Add(1)
					}
				}
			})
			advertise(t, tr.altSvcCache(), u, altValue("", port))
			if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
				t.Fatalf("first request over %s, want HTTP/3.0", resp.Proto)
			}

			var held <-chan string
			if tc.hold {
				held = getInBackground(tr, u+"/hold")
				eventually(t, "the held request at the server", func() bool { return paths.has("/hold") })
			}

			spoilNext.Store(true)
			body := &onceReader{r: strings.NewReader("unsent")}
			rec := &hookRecorder{}
			req := newRetryRequest(t, "POST", u+"/unsent", body, rec)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("unsent request not retried: %v", err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if spoiled.Load() != 1 {
				t.Fatal("the request never met the spoiled HTTP/3 connection")
			}
			if resp.Proto != "HTTP/1.1" || string(got) != "HTTP/1.1 unsent" {
				t.Fatalf("retry: %s %q, want HTTP/1.1 with the body", resp.Proto, got)
			}
			lines := rec.lines()
			if countPrefix(lines, "GotConn udp") != 1 || countPrefix(lines, "GotConn tcp") != 1 || countPrefix(lines, "GetConn") != 2 {
				t.Fatalf("hooks %v: want an HTTP/3 attempt then TCP", lines)
			}
			if paths.has("/unsent") {
				t.Fatal("the unsent request reached the HTTP/3 server")
			}
			if tc.hold {
				releaseHeld()
				if got := <-held; got != "HTTP/3.0 HTTP/3.0 " {
					t.Fatalf("held request: %q, want it completed over HTTP/3", got)
				}
			}
		})
	}
}

// startH3Config is startH3 with a QUIC configuration, returning the server
// first.
func startH3Config(t *testing.T, h http.Handler, qc *quic.Config) (*http3.Server, int) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(h3Cert(t).ServerConfig()), QUICConfig: qc}
	done := make(chan struct{})
	go func() { s.Serve(pc); close(done) }()
	t.Cleanup(func() { s.Close(); pc.Close(); <-done })
	return s, pc.LocalAddr().(*net.UDPAddr).Port
}

// pathLog records request paths.
type pathLog struct {
	mu    sync.Mutex // guards paths
	paths []string
}

func (l *pathLog) add(p string) {
	l.mu.Lock()
	l.paths = append(l.paths, p)
	l.mu.Unlock()
}

func (l *pathLog) has(p string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.paths, p)
}

// count is how many requests h saw.
func (h *protoHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}
