package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/h2conn"
	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// HTTP/2 behaviour of ferry's own design, beyond the differential rows:
// coalesced first dials, idle expiry through the pool, CloseIdleConnections,
// transparent retries and the protocol selection table.

// h2ConnCounter is a TLS h2 server counting accepted and closed connections.
type h2ConnCounter struct {
	hs       *httptest.Server
	mu       sync.Mutex // guards accepted, closed
	accepted int
	closed   int
	closedCh chan struct{}
}

func startCountingH2(t *testing.T, cert *selfsigned.Cert, h http.HandlerFunc) *h2ConnCounter {
	c := &h2ConnCounter{closedCh: make(chan struct{}, 64)}
	c.hs = httptest.NewUnstartedServer(h)
	c.hs.EnableHTTP2 = true
	c.hs.TLS = cert.ServerConfig()
	c.hs.Config.ErrorLog = nilLogger()
	c.hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch st {
		case http.StateNew:
			c.accepted++
		case http.StateClosed, http.StateHijacked:
			c.closed++
			c.closedCh <- struct{}{}
		}
	}
	c.hs.StartTLS()
	t.Cleanup(c.hs.Close)
	return c
}

func (c *h2ConnCounter) counts() (accepted, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted, c.closed
}

func (c *h2ConnCounter) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-c.closedCh:
	case <-time.After(10 * time.Second):
		t.Fatal("server saw no connection close")
	}
}

func h2GetOK(t *testing.T, rt http.RoundTripper, url, wantProto string) {
	t.Helper()
	resp, err := rt.RoundTrip(newReq(t, "GET", url, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Proto != wantProto || resp.TLS == nil && strings.HasPrefix(url, "https") {
		t.Fatalf("status %d proto %s tls %v", resp.StatusCode, resp.Proto, resp.TLS != nil)
	}
}

func TestH2ConcurrentFirstRequestsOneDial(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, impl := range []string{"ferry", "nethttp"} {
		t.Run(impl, func(t *testing.T) {
			srv := startCountingH2(t, cert, hello)
			std := h2BaseClient(cert)
			var rt http.RoundTripper = std
			if impl == "ferry" {
				rt = From(std)
			}
			defer closeIdle(rt)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < 20; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					h2GetOK(t, rt, srv.hs.URL, "HTTP/2.0")
				}()
			}
			close(start)
			wg.Wait()
			accepted, _ := srv.counts()
			if impl == "nethttp" {
				t.Logf("net/http accepted %d connections for 20 concurrent first requests", accepted)
				return
			}
			if accepted != 1 {
				t.Fatalf("ferry: server accepted %d connections, want 1", accepted)
			}
		})
	}
}

func TestH2IdleExpiryAndCloseIdle(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("IdleConnTimeout", func(t *testing.T) {
		srv := startCountingH2(t, cert, hello)
		var mu sync.Mutex // guards now
		now := time.Unix(1e9, 0)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		tr := From(h2BaseClient(cert))
		tr.IdleConnTimeout = time.Hour
		tr.h2.clock = clock
		defer tr.CloseIdleConnections()
		h2GetOK(t, tr, srv.hs.URL, "HTTP/2.0")
		h2GetOK(t, tr, srv.hs.URL, "HTTP/2.0")
		if a, c := srv.counts(); a != 1 || c != 0 {
			t.Fatalf("accepted %d closed %d before expiry", a, c)
		}
		mu.Lock()
		now = now.Add(59 * time.Minute)
		mu.Unlock()
		tr.pool.SetIdleTimeout(time.Hour) // sweeps now
		if _, c := srv.counts(); c != 0 {
			t.Fatal("closed before IdleConnTimeout")
		}
		mu.Lock()
		now = now.Add(2 * time.Minute)
		mu.Unlock()
		tr.pool.SetIdleTimeout(time.Hour)
		srv.waitClosed(t)
		h2GetOK(t, tr, srv.hs.URL, "HTTP/2.0")
		if a, _ := srv.counts(); a != 2 {
			t.Fatalf("accepted %d, want a new connection after expiry", a)
		}
	})
	t.Run("CloseIdleConnections", func(t *testing.T) {
		srv := startCountingH2(t, cert, hello)
		tr := From(h2BaseClient(cert))
		h2GetOK(t, tr, srv.hs.URL, "HTTP/2.0")
		// A response still being read keeps its connection open.
		resp, err := tr.RoundTrip(newReq(t, "GET", srv.hs.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		tr.CloseIdleConnections()
		if _, c := srv.counts(); c != 0 {
			t.Fatal("CloseIdleConnections closed a connection in use")
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		srv.waitClosed(t)
		h2GetOK(t, tr, srv.hs.URL, "HTTP/2.0")
		if a, _ := srv.counts(); a != 2 {
			t.Fatalf("accepted %d, want 2", a)
		}
		tr.CloseIdleConnections()
		srv.waitClosed(t)
	})
}

func TestH2NoLeaks(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv := startCountingH2(t, cert, hello)
	tr := From(h2BaseClient(cert))
	h2GetOK(t, tr, srv.hs.URL, "HTTP/2.0") // warm runtime fds (poller, certs)
	tr.CloseIdleConnections()
	srv.waitClosed(t)
	before := countFDs(t)
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); h2GetOK(t, tr, srv.hs.URL, "HTTP/2.0") }()
		}
		wg.Wait()
		tr.CloseIdleConnections()
		srv.waitClosed(t)
	}
	// Closing sockets may lag (the client's connection goroutines, the
	// server's); a leaked one stays however long the poll waits.
	deadline := time.Now().Add(30 * time.Second)
	after := countFDs(t)
	for after > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		after = countFDs(t)
	}
	if after > before {
		t.Fatalf("fds: %d before, %d after", before, after)
	}
}

// startRawH2 starts a cleartext HTTP/2 server written with x/net's Framer
// that answers each request HEADERS through script (connection and stream
// numbered from 0), to produce what real servers rarely send on demand:
// REFUSED_STREAM, GOAWAY naming an earlier stream.
func startRawH2(t *testing.T, script func(conn, stream int, fr *http2.Framer, id uint32) error) *testpeer.H2Server {
	t.Helper()
	return testpeer.StartH2(t, testpeer.H2Script{OnHeaders: script})
}

func h2cTransport() *Transport {
	return &Transport{Protocols: protocolsOf("h2c")}
}

func TestH2RetryNotProcessed(t *testing.T) {
	refuseFirst := func(conn, stream int, fr *http2.Framer, id uint32) error {
		if conn == 0 && stream == 0 {
			return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		}
		return testpeer.H2OK(fr, id)
	}
	goAwaySecond := func(conn, stream int, fr *http2.Framer, id uint32) error {
		if conn == 0 && stream == 1 {
			return fr.WriteGoAway(id-2, http2.ErrCodeNo, nil)
		}
		return testpeer.H2OK(fr, id)
	}
	cases := []struct {
		name        string
		script      func(conn, stream int, fr *http2.Framer, id uint32) error
		warm        bool
		body        func() io.Reader // nil: GET without body
		getBody     bool
		wantErr     bool
		wantConns   int
		wantStreams int
	}{
		{name: "refused-stream/get", script: refuseFirst, wantConns: 1, wantStreams: 2},
		{name: "refused-stream/post-with-getbody", script: refuseFirst, body: func() io.Reader { return strings.NewReader("x") }, getBody: true, wantConns: 1, wantStreams: 2},
		{name: "refused-stream/post-streaming-body-not-replayable", script: refuseFirst, body: func() io.Reader { return &streamBody{strings.NewReader("x")} }, wantErr: true, wantConns: 1, wantStreams: 1},
		{name: "goaway-earlier-stream/get", script: goAwaySecond, warm: true, wantConns: 2, wantStreams: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startRawH2(t, tc.script)
			tr := h2cTransport()
			defer tr.CloseIdleConnections()
			url := "http://" + s.Addr() + "/"
			if tc.warm {
				h2GetOK(t, tr, url, "HTTP/2.0")
			}
			method := "GET"
			var body io.Reader
			if tc.body != nil {
				method, body = "POST", tc.body()
			}
			req := newReq(t, method, url, body)
			if !tc.getBody {
				req.GetBody = nil
			}
			resp, err := tr.RoundTrip(req)
			if tc.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatal("want an error")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "ok" || resp.Request != req {
					t.Fatalf("body %q, Request is caller's: %v", b, resp.Request == req)
				}
			}
			if c, st := s.Counts(); c != tc.wantConns || st != tc.wantStreams {
				t.Fatalf("server: %d conns %d streams, want %d and %d", c, st, tc.wantConns, tc.wantStreams)
			}
		})
	}
	t.Run("capped", func(t *testing.T) {
		s := startRawH2(t, func(conn, stream int, fr *http2.Framer, id uint32) error {
			return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		})
		tr := h2cTransport()
		tr.h2.backoffUnit = time.Millisecond
		defer tr.CloseIdleConnections()
		_, err := tr.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil))
		var se http2.StreamError
		if err == nil || !errors.As(err, &se) || se.Code != http2.ErrCodeRefusedStream {
			t.Fatalf("err = %v, want REFUSED_STREAM after the retries", err)
		}
		if _, st := s.Counts(); st != maxSharedRetries+1 {
			t.Fatalf("%d attempts, want %d", st, maxSharedRetries+1)
		}
	})
}

// countingBody records whether Close was called.
type countingBody struct {
	io.Reader
	closed atomic.Int32
}

func (b *countingBody) Close() error { b.closed.Add(1); return nil }

func TestH2ReplayBody(t *testing.T) {
	cases := []struct {
		name      string
		steps     func(b *h2conn.ReplayBody)
		wantClose int32
	}{
		{"close-held-then-settle", func(b *h2conn.ReplayBody) { b.Close(); b.Settle() }, 1},
		{"settle-then-close", func(b *h2conn.ReplayBody) { b.Settle(); b.Close(); b.Close() }, 1},
		{"close-held-then-detach", func(b *h2conn.ReplayBody) { b.Close(); b.Detach(); b.Close() }, 0},
		{"close-held-then-closeBody", func(b *h2conn.ReplayBody) { b.Close(); b.CloseBody(); b.CloseBody() }, 1},
		{"detach-then-closeBody", func(b *h2conn.ReplayBody) { b.Detach(); b.CloseBody() }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cb := &countingBody{Reader: strings.NewReader("x")}
			b := h2conn.NewReplayBody(cb)
			tc.steps(b)
			if got := cb.closed.Load(); got != tc.wantClose {
				t.Fatalf("closed %d times, want %d", got, tc.wantClose)
			}
		})
	}
	var nilBody *h2conn.ReplayBody
	nilBody.Settle()
	nilBody.Detach()
	nilBody.CloseBody()
}

func TestH2ProtocolSelection(t *testing.T) {
	usedStd := &http.Transport{}
	usedStd.CloseIdleConnections() // installs net/http's own TLSNextProto entries
	if usedStd.TLSNextProto["h2"] == nil {
		t.Fatal("net/http did not install its h2 entry; the bundled-entry case tests nothing")
	}
	userFn := func(string, *tls.Conn) http.RoundTripper { return nil }
	cases := []struct {
		name    string
		tr      *Transport
		godebug string
		h1, h2  bool
		h2c     bool
		alpn    []string
		userH2  bool
	}{
		{name: "zero", tr: &Transport{}, h1: true, h2: true, alpn: []string{"h2", "http/1.1"}},
		{name: "New", tr: New(), h1: true, h2: true, alpn: []string{"h2", "http/1.1"}},
		{name: "tlsconfig", tr: &Transport{TLSClientConfig: &tls.Config{}}, h1: true},
		{name: "tlsconfig+force", tr: &Transport{TLSClientConfig: &tls.Config{NextProtos: []string{"foo"}}, ForceAttemptHTTP2: true}, h1: true, h2: true, alpn: []string{"foo", "h2", "http/1.1"}},
		{name: "dialcontext", tr: &Transport{DialContext: (&net.Dialer{}).DialContext}, h1: true},
		{name: "dialtls", tr: &Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return nil, nil }}, h1: true},
		{name: "empty-tlsnextproto", tr: &Transport{TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}, ForceAttemptHTTP2: true}, h1: true},
		{name: "user-h2-entry", tr: &Transport{TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{"h2": userFn}, TLSClientConfig: &tls.Config{NextProtos: []string{"h2"}}}, h1: true, h2: true, alpn: []string{"h2"}, userH2: true},
		{name: "From-used-std", tr: From(usedStd), h1: true, h2: true, alpn: []string{"h2", "http/1.1"}},
		{name: "godebug-off", tr: &Transport{}, godebug: "x=1,http2client=0", h1: true},
		{name: "godebug-off-protocols", tr: &Transport{Protocols: protocolsOf("h1", "h2")}, godebug: "http2client=0", h1: true, alpn: nil},
		{name: "protocols-h1", tr: &Transport{Protocols: protocolsOf("h1")}, h1: true},
		{name: "protocols-h2", tr: &Transport{Protocols: protocolsOf("h2"), TLSClientConfig: &tls.Config{NextProtos: []string{"http/1.1", "x"}}}, h2: true, alpn: []string{"x", "h2"}},
		{name: "protocols-h2c", tr: &Transport{Protocols: protocolsOf("h2c")}, h2c: true},
		{name: "protocols-h1-h2c", tr: &Transport{Protocols: protocolsOf("h1", "h2c")}, h1: true},
		{name: "h2-off-drops-h2-from-nextprotos", tr: &Transport{TLSClientConfig: &tls.Config{NextProtos: []string{"h2", "http/1.1"}}}, h1: true, alpn: []string{"http/1.1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GODEBUG", tc.godebug)
			ps := computeProtocols(tc.tr)
			_, userH2 := ps.nextProto["h2"]
			got := []any{ps.h1, ps.h2, ps.h2c, ps.alpn, userH2}
			want := []any{tc.h1, tc.h2, tc.h2c, tc.alpn, tc.userH2}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("h1,h2,h2c,alpn,userH2 = %v, want %v", got, want)
			}
		})
	}
	ws := newReq(t, "GET", "https://x/", nil)
	ws.Header.Set("Connection", "keep-alive, Upgrade")
	ws.Header.Set("Upgrade", "WebSocket")
	ps := computeProtocols(&Transport{})
	if ps.sharedKey("https", ws) || !ps.sharedKey("https", newReq(t, "GET", "https://x/", nil)) || ps.sharedKey("http", ws) {
		t.Fatal("sharedKey: a websocket upgrade must get an HTTP/1-only key, others a shared one")
	}
	if got := ps.alpnFor(connKey{h1Only: true}); got != nil {
		t.Fatalf("ALPN for an HTTP/1-only key = %v, want none", got)
	}
}

// limitRefusingConn is a sharedConn whose RoundTrip refuses as h2conn does
// for a provisional stream the server's SETTINGS left no room for: it
// closes the request body it was given and reports ReasonStreamLimit.
type limitRefusingConn struct{ calls int }

func (c *limitRefusingConn) ReserveStream() bool { return true }
func (c *limitRefusingConn) Usable() bool        { return true }
func (c *limitRefusingConn) Close() error        { return nil }
func (c *limitRefusingConn) ReleaseStream()      {}
func (c *limitRefusingConn) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls++
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, &h2conn.NotProcessedError{Reason: h2conn.ReasonStreamLimit, BodyUnread: true, Err: errors.New("at the limit")}
}

// TestH2StreamLimitRetry: a request refused with ReasonStreamLimit goes to
// another connection at once (no backoff, even after earlier retries) and
// without using up a retry, and keeps its unread body (no GetBody needed).
func TestH2StreamLimitRetry(t *testing.T) {
	tr := &Transport{}
	tr.h2.backoffUnit = time.Hour // a backoff would end in the deadline below
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := &countingBody{Reader: strings.NewReader("payload")}
	req := newReq(t, "POST", "https://example.invalid/", nil).WithContext(ctx)
	req.Body, req.GetBody = body, nil
	o := &h1conn.Outgoing{Req: req, Body: body}
	sc := &limitRefusingConn{}
	att := sharedAttempts{retries: maxSharedRetries - 1}
	for range 3 {
		_, err := tr.roundTripShared(ctx, req, o, connKey{}, sc, &att)
		if err != errRetryShared {
			t.Fatalf("err = %v, want a retry on another connection", err)
		}
	}
	if att.retries != maxSharedRetries-1 || att.limitRefusals != 3 {
		t.Fatalf("retries = %d, limit refusals %d, want %d and 3 (a stream-limit refusal is not counted as a retry)",
			att.retries, att.limitRefusals, maxSharedRetries-1)
	}
	if o.Body != io.ReadCloser(body) || body.closed.Load() != 0 {
		t.Fatalf("body replaced (%v) or closed %d times; the retry must get it unread", o.Body != io.ReadCloser(body), body.closed.Load())
	}
	if got, _ := io.ReadAll(o.Body); string(got) != "payload" {
		t.Fatalf("body left for the retry reads %q", got)
	}
}
