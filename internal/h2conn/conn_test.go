package h2conn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"
)

func helloHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s %s", r.Proto, r.URL.Path)
	})
}

func TestRoundTripBasics(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"tls", true}, {"h2c", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.tls, nil, helloHandler())
			c := newConn(t, s, Config{})
			if !c.Usable() {
				t.Fatal("new conn not usable")
			}
			if (c.TLS() != nil) != tc.tls {
				t.Fatalf("TLS() = %v, want TLS %v", c.TLS(), tc.tls)
			}
			// The connection fires hooks from the request's goroutine,
			// its body writer and its reader, so only a partial order is guaranteed: GotConn first (fired by
			// Conn on the caller's goroutine), WroteHeaders before
			// WroteRequest, and GotFirstResponseByte somewhere after
			// GotConn.
			var mu sync.Mutex // guards got and order
			var got []httptrace.GotConnInfo
			var order []string
			add := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
			trace := &httptrace.ClientTrace{
				GotConn:              func(i httptrace.GotConnInfo) { mu.Lock(); got = append(got, i); mu.Unlock(); add("GotConn") },
				WroteHeaders:         func() { add("WroteHeaders") },
				WroteRequest:         func(httptrace.WroteRequestInfo) { add("WroteRequest") },
				GotFirstResponseByte: func() { add("GotFirstResponseByte") },
			}
			for i := range 2 {
				mu.Lock()
				order = order[:0]
				mu.Unlock()
				if !c.ReserveStream() {
					t.Fatal("ReserveStream false on an idle conn")
				}
				req := newRequest(t, "GET", s.url("/x"), nil)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
				resp, err := c.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Proto != "HTTP/2.0" || resp.ProtoMajor != 2 || resp.ProtoMinor != 0 {
					t.Fatalf("Proto = %q %d.%d", resp.Proto, resp.ProtoMajor, resp.ProtoMinor)
				}
				if (resp.TLS != nil) != tc.tls {
					t.Fatalf("resp.TLS = %v, want set %v", resp.TLS, tc.tls)
				}
				if resp.TLS != nil && resp.TLS.NegotiatedProtocol != "h2" {
					t.Fatalf("negotiated %q", resp.TLS.NegotiatedProtocol)
				}
				if resp.Request != req {
					t.Fatal("resp.Request is not the caller's request")
				}
				if body := readAll(t, resp); body != "hello HTTP/2.0 /x" {
					t.Fatalf("body %q", body)
				}
				mu.Lock()
				seen := strings.Join(order, ",")
				mu.Unlock()
				pos := func(h string) int { return strings.Index(seen, h) }
				if pos("GotConn") != 0 || pos("WroteHeaders") < 0 || pos("WroteRequest") < pos("WroteHeaders") || pos("GotFirstResponseByte") < 0 || strings.Count(seen, "GotConn") != 1 {
					t.Fatalf("request %d: hooks %v", i, seen)
				}
			}
			if len(got) != 2 || got[0].Reused || !got[1].Reused || !got[1].WasIdle || got[0].Conn != c.NetConn() {
				t.Fatalf("GotConn infos %+v", got)
			}
			if _, idle := c.IdleSince(); !idle {
				t.Fatal("conn not idle after bodies were read")
			}
		})
	}
}

func TestMultiplexing(t *testing.T) {
	const n = 16
	var (
		mu      sync.Mutex
		arrived int
		remotes = map[string]bool{}
		all     = make(chan struct{})
	)
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		remotes[r.RemoteAddr] = true
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		<-all // every request is in flight at once before any answers
		io.WriteString(w, r.URL.Path)
	}))
	c := newConn(t, s, Config{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		if !c.ReserveStream() {
			t.Fatalf("ReserveStream %d false", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/%d", i)
			resp, err := c.RoundTrip(newRequest(t, "GET", s.url(path), nil))
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != path {
				errs <- fmt.Errorf("body %q err %v, want %q", b, err, path)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(remotes) != 1 {
		t.Fatalf("requests came over %d connections, want 1", len(remotes))
	}
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("slots leaked")
	}
}

// TestStreamLimit: with the server's MaxConcurrentStreams at 2, a third
// reservation fails (the caller dials another conn) until a body closes; in
// strict mode it succeeds and the request waits for a stream.
func TestStreamLimit(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			started := make(chan string, 3)
			s := startServer(t, true, &http.HTTP2Config{MaxConcurrentStreams: 2}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/warm" {
					return
				}
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				started <- r.URL.Path
				// The server starts a new handler only when fewer than
				// MaxConcurrentStreams are running, so a reset stream's
				// handler must end.
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			c := newConn(t, s, Config{StrictMaxConcurrentStreams: strict})
			// One request first so that the server's SETTINGS are known.
			resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/warm"), nil))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)

			var bodies []io.Closer
			for i := range 2 {
				if !c.ReserveStream() {
					t.Fatalf("ReserveStream %d false below the limit", i)
				}
				resp, err := c.RoundTrip(newRequest(t, "GET", s.url(fmt.Sprintf("/%d", i)), nil))
				if err != nil {
					t.Fatal(err)
				}
				<-started
				bodies = append(bodies, resp.Body)
			}
			if !strict {
				if c.ReserveStream() {
					t.Fatal("ReserveStream true at the peer's limit")
				}
				if !c.Usable() {
					t.Fatal("a full conn reported unusable")
				}
				bodies[0].Close()
				// The closed body's stream is reset and counts until
				// the server acknowledges the PING sent with the reset.
				waitFor(t, "a stream once the closed body's reset was acknowledged", c.ReserveStream)
				c.ReleaseStream()
				bodies[1].Close()
				if _, idle := c.IdleSince(); !idle {
					t.Fatal("not idle after every body closed")
				}
				return
			}
			// strict: the third request is accepted and waits.
			if !c.ReserveStream() {
				t.Fatal("strict: ReserveStream false on a full usable conn")
			}
			got := make(chan error, 1)
			go func() {
				resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/third"), nil))
				if err == nil {
					resp.Body.Close()
				}
				got <- err
			}()
			select {
			case p := <-started:
				t.Fatalf("request %s started beyond the limit", p)
			case err := <-got:
				t.Fatalf("third request returned early: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			bodies[0].Close()
			if p := <-started; p != "/third" {
				t.Fatalf("started %s", p)
			}
			bodies[1].Close()
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestServerPushRefused(t *testing.T) {
	pushErr := make(chan error, 1)
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := w.(http.Pusher)
		if !ok {
			pushErr <- errors.New("no Pusher")
			return
		}
		pushErr <- p.Push("/pushed", nil)
	}))
	c := newConn(t, s, Config{})
	resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if err := <-pushErr; !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("Push error = %v, want http.ErrNotSupported (client disables push)", err)
	}
}

func TestBigBodies(t *testing.T) {
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, r.Body) // echo, streaming both ways at once
	}))
	c := newConn(t, s, Config{HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 1 << 20, MaxReceiveBufferPerConnection: 4 << 20}})
	payload := bytes.Repeat([]byte("0123456789abcdef"), (8<<20)/16)
	req := newRequest(t, "PUT", s.url("/"), bytes.NewReader(payload))
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil || n != int64(len(payload)) {
		t.Fatalf("read %d bytes, err %v", n, err)
	}
	if want := sha256.Sum256(payload); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("echoed body differs")
	}
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("slot leaked")
	}
}

func TestCancelOneStream(t *testing.T) {
	held := make(chan struct{}, 1)
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			held <- struct{}{}
			<-r.Context().Done() // no response head until the reset
			return
		}
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		if r.URL.Path == "/slow" {
			<-r.Context().Done() // until the client resets the stream
			return
		}
		io.WriteString(w, "fine")
	}))
	c := newConn(t, s, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow, err := c.RoundTrip(newRequest(t, "GET", s.url("/slow"), nil).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(slow.Body)
		readErr <- err
	}()
	cancel()
	if err := <-readErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled body read error %v, want context.Canceled", err)
	}
	slow.Body.Close()
	// The other streams and the connection are unaffected.
	for range 3 {
		resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/fast"), nil))
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, resp); b != "fine" {
			t.Fatalf("body %q", b)
		}
	}
	if !c.Usable() {
		t.Fatal("conn unusable after one stream was cancelled")
	}
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("slot leaked")
	}

	// Cancelled before the response head: RoundTrip returns the context's error.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.RoundTrip(newRequest(t, "GET", s.url("/fast"), nil).WithContext(ctx2)); !errors.Is(err, context.Canceled) || IsRetryable(err) {
		t.Fatalf("err %v, want context.Canceled, not retryable", err)
	}
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("slot leaked after a failed RoundTrip")
	}

	// Cancelled while waiting for the response head, once the server has
	// the request: the context's error, and the connection stays usable.
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	waiting := goRoundTrip(c, newRequest(t, "GET", s.url("/held"), nil).WithContext(ctx3))
	<-held
	cancel3()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while waiting for the head: err %v, want context.Canceled", err)
	}
	if !c.Usable() {
		t.Fatal("a cancelled request cost the connection")
	}
}

// TestGoAwayMidFlight: the server shuts down gracefully while a request is
// in flight; that request completes, the conn becomes unusable, and new
// requests get a retryable error, both before (reserved earlier) and after.
func TestGoAwayMidFlight(t *testing.T) {
	release := make(chan struct{})
	inHandler := make(chan struct{})
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/inflight" {
			close(inHandler)
			<-release
		}
		io.WriteString(w, "done")
	}))
	c := newConn(t, s, Config{})
	type result struct {
		body string
		err  error
	}
	first := make(chan result, 1)
	go func() {
		resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/inflight"), nil))
		if err != nil {
			first <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		first <- result{string(b), err}
	}()
	<-inHandler
	if !c.ReserveStream() { // reserved before GOAWAY, sent after it
		t.Fatal("ReserveStream false before GOAWAY")
	}
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- s.srv.Shutdown(context.Background()) }()
	waitFor(t, "GOAWAY to reach the client", func() bool { return goAwaySeen(c) })

	_, err := c.RoundTrip(newRequest(t, "GET", s.url("/late"), nil))
	if !IsRetryable(err) {
		t.Fatalf("request reserved before GOAWAY: err %v, want retryable", err)
	}
	close(release)
	if r := <-first; r.err != nil || r.body != "done" {
		t.Fatalf("in-flight request: %q, %v", r.body, r.err)
	}
	if c.Usable() {
		t.Fatal("Usable after GOAWAY")
	}
	if c.ReserveStream() {
		t.Fatal("ReserveStream true after GOAWAY")
	}
	_, err = c.RoundTrip(newRequest(t, "GET", s.url("/after"), nil))
	var np *NotProcessedError
	if !errors.As(err, &np) || !np.BodyUnread {
		t.Fatalf("after GOAWAY: err %v, want NotProcessedError with BodyUnread", err)
	}
	if err := <-shutdownDone; err != nil {
		t.Fatal(err)
	}
}

func TestNotProcessedFromServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reply  func(fr *http2Framer, id uint32) error
		reason Reason
	}{
		{"refused_stream", func(fr *http2Framer, id uint32) error {
			return fr.WriteRSTStream(id, http2ErrCodeRefusedStream)
		}, ReasonRefusedStream},
		{"goaway_before_stream", func(fr *http2Framer, id uint32) error {
			return fr.WriteGoAway(0, http2ErrCodeNo, nil)
		}, ReasonGoAway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := startRawServer(t, tc.reply)
			nc := dialH2(t, rs.Addr(), false)
			c, err := NewClientConn(nc, Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.RoundTrip(newRequest(t, "GET", "http://"+rs.Addr()+"/", nil))
			var np *NotProcessedError
			if !errors.As(err, &np) || np.Reason != tc.reason || !IsRetryable(err) {
				t.Fatalf("err %v, want NotProcessedError %v", err, tc.reason)
			}
			if _, idle := c.IdleSince(); !idle {
				t.Fatal("slot leaked")
			}
			if tc.reason == ReasonRefusedStream && !c.Usable() {
				t.Fatal("REFUSED_STREAM made the conn unusable")
			}
			if tc.reason == ReasonGoAway && c.Usable() {
				t.Fatal("conn usable after GOAWAY")
			}
		})
	}
}

// TestPingHealthCheck: a peer that stops answering (the proxy swallows
// everything) is detected by the PING health check and the conn is closed.
func TestPingHealthCheck(t *testing.T) {
	s := startServer(t, true, nil, helloHandler())
	p := startStallProxy(t, s.addr())
	nc := dialH2(t, p.ln.Addr().String(), true)
	c, err := NewClientConn(nc, Config{HTTP2: &http.HTTP2Config{SendPingTimeout: 50 * time.Millisecond, PingTimeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if !c.Usable() {
		t.Fatal("unusable before the stall")
	}
	p.stalled.Store(true)
	waitFor(t, "the health check to close the dead conn", func() bool { return !c.Usable() })
	if _, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil)); !IsRetryable(err) {
		t.Fatalf("err %v, want retryable on a conn closed by the health check", err)
	}
}

type fakeClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (f *fakeClock) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func TestIdleSinceAndCloseIfIdle(t *testing.T) {
	s := startServer(t, true, nil, helloHandler())
	clk := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newConn(t, s, Config{Clock: clk.now})
	t0 := clk.now()
	if since, idle := c.IdleSince(); !idle || !since.Equal(t0) {
		t.Fatalf("new conn: IdleSince %v %v, want %v true", since, idle, t0)
	}
	if !c.ReserveStream() {
		t.Fatal("reserve")
	}
	if _, idle := c.IdleSince(); idle {
		t.Fatal("idle with a reserved stream")
	}
	clk.advance(time.Minute)
	var gotIdle time.Duration
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { gotIdle = i.IdleTime }}
	req := newRequest(t, "GET", s.url("/"), nil)
	resp, err := c.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil {
		t.Fatal(err)
	}
	if gotIdle != 0 {
		t.Fatalf("first request IdleTime %v, want 0 (not reused)", gotIdle)
	}
	if c.CloseIfIdle() {
		t.Fatal("CloseIfIdle closed a busy conn")
	}
	clk.advance(time.Minute)
	readAll(t, resp)
	t1 := clk.now()
	if since, idle := c.IdleSince(); !idle || !since.Equal(t1) {
		t.Fatalf("after body: IdleSince %v %v, want %v true", since, idle, t1)
	}
	clk.advance(30 * time.Second)
	resp, err = c.RoundTrip(req.WithContext(httptrace.WithClientTrace(context.Background(), trace)))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if gotIdle != 30*time.Second {
		t.Fatalf("GotConn IdleTime %v, want 30s", gotIdle)
	}
	if !c.CloseIfIdle() {
		t.Fatal("CloseIfIdle did not close an idle conn")
	}
	if c.Usable() || c.ReserveStream() {
		t.Fatal("closed conn still usable")
	}
}

func TestReleaseStream(t *testing.T) {
	s := startServer(t, true, &http.HTTP2Config{MaxConcurrentStreams: 1}, helloHandler())
	c := newConn(t, s, Config{})
	resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	for i := range 3 { // the single stream is given back each time
		if !c.ReserveStream() {
			t.Fatalf("ReserveStream %d false", i)
		}
		if c.ReserveStream() {
			t.Fatal("second reservation beyond MaxConcurrentStreams=1")
		}
		c.ReleaseStream()
		if !streamsSettled(c) {
			t.Fatalf("ReleaseStream %d: the reservation is still counted", i)
		}
	}
	c.ReleaseStream() // nothing reserved: no effect
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("not idle")
	}
	resp, err = c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
}

func TestConfigHonoured(t *testing.T) {
	var gotAE, gotUA string
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAE = r.Header.Get("Accept-Encoding")
		gotUA = r.Header.Get("User-Agent")
		if r.URL.Path == "/bighead" {
			w.Header().Set("X-Big", strings.Repeat("a", 8<<10))
		}
	}))
	t.Run("compression", func(t *testing.T) {
		for _, disable := range []bool{false, true} {
			c := newConn(t, s, Config{DisableCompression: disable})
			resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if (gotAE == "gzip") == disable {
				t.Fatalf("DisableCompression=%v: Accept-Encoding %q", disable, gotAE)
			}
			if gotUA == "" {
				t.Fatal("no default User-Agent")
			}
		}
	})
	t.Run("max_response_header_bytes", func(t *testing.T) {
		c := newConn(t, s, Config{MaxResponseHeaderBytes: 1 << 10})
		_, err := c.RoundTrip(newRequest(t, "GET", s.url("/bighead"), nil))
		if err == nil || IsRetryable(err) {
			t.Fatalf("err %v, want a non-retryable header-size error", err)
		}
		big := newConn(t, s, Config{MaxResponseHeaderBytes: 64 << 10})
		resp, err := big.RoundTrip(newRequest(t, "GET", s.url("/bighead"), nil))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	})
	t.Run("disable_keep_alives", func(t *testing.T) {
		c := newConn(t, s, Config{DisableKeepAlives: true})
		resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if c.Usable() {
			t.Fatal("single-use conn usable after its request")
		}
	})
}

func TestNewClientConnErrors(t *testing.T) {
	if _, err := NewClientConn(nil, Config{}); err == nil {
		t.Fatal("nil conn accepted")
	}
	// A TLS server that only speaks HTTP/1.1: ALPN does not give h2.
	s := startServerProtos(t, true, false, nil, helloHandler())
	nc := dialH2(t, s.addr(), true)
	_, err := NewClientConn(nc, Config{})
	if !errors.Is(err, ErrNotH2) {
		t.Fatalf("err %v, want ErrNotH2", err)
	}
	if _, werr := nc.Write([]byte("x")); werr == nil {
		t.Fatal("NewClientConn left the rejected conn open")
	}
}

func TestShutdown(t *testing.T) {
	s := startServer(t, false, nil, helloHandler())
	c := newConn(t, s, Config{})
	resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Shutdown(context.Background()) }()
	waitFor(t, "Shutdown to stop new streams", func() bool { return !c.Usable() })
	if body := readAll(t, resp); body != "hello HTTP/2.0 /" {
		t.Fatalf("in-flight body %q", body)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()); err == nil {
		t.Fatal("Ping succeeded on a shut down conn")
	}
}

// TestConnectionCloseRequestKnownAtOnce: a request asking to close the
// connection (Request.Close, or Connection: close) makes the connection
// take no new stream from the moment it is sent. The handler holds its
// response open until the check: once the stream ends the connection
// closes itself, which would hide a late verdict.
func TestConnectionCloseRequestKnownAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		ask  func(*http.Request)
	}{
		{"request_close", func(r *http.Request) { r.Close = true }},
		{"connection_header", func(r *http.Request) { r.Header.Set("Connection", "Close") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endResponse := make(chan struct{})
			s := startServer(t, false, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "hello")
				w.(http.Flusher).Flush()
				select {
				case <-endResponse:
				case <-r.Context().Done():
				}
			}))
			var once sync.Once
			end := func() { once.Do(func() { close(endResponse) }) }
			t.Cleanup(end) // before the server's cleanup
			c := newConn(t, s, Config{})
			req := newRequest(t, "GET", s.url("/"), nil)
			tc.ask(req)
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			// The stream is still open and its slot in use: the
			// connection already takes no new stream.
			if c.Usable() {
				t.Fatal("ferry does not know that a request asking to close the connection went out")
			}
			end()
			readAll(t, resp)
			if c.Usable() {
				t.Fatal("connection usable after a request asking to close it")
			}
		})
	}
}
