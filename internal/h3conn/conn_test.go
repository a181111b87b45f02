package h3conn

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// echoHandler reports what the server saw: method, host, body, trailers.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Trailer", "X-Echo-Trailer")
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Host", r.Host)
	w.Header().Set("X-Proto", r.Proto)
	w.Header().Set("X-Req-Trailer", r.Trailer.Get("X-Client-Trailer"))
	w.Write(body)
	w.Header().Set("X-Echo-Trailer", fmt.Sprintf("len=%d", len(body)))
}

func TestRoundTripMethodsBodiesTrailers(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	d := newTestDialer(t, s, nil)
	c := dialTest(t, d, s)

	tests := []struct {
		name        string
		method      string
		body        io.Reader
		reqTrailer  string
		wantBody    string
		wantTrailer string
	}{
		{name: "get", method: http.MethodGet, wantTrailer: "len=0"},
		{name: "post", method: http.MethodPost, body: strings.NewReader("hello h3"), wantBody: "hello h3", wantTrailer: "len=8"},
		{name: "post_large", method: http.MethodPost, body: bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20)), wantBody: strings.Repeat("x", 1<<20), wantTrailer: "len=1048576"},
		{name: "put_with_trailer", method: http.MethodPut, body: io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd")), reqTrailer: "t-value", wantBody: "abcd", wantTrailer: "len=4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "https://localhost/echo", tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.reqTrailer != "" {
				req.Trailer = http.Header{"X-Client-Trailer": nil}
				req.ContentLength = -1
				req.Body = &testpeer.TrailerBody{R: req.Body, Set: func() { req.Trailer.Set("X-Client-Trailer", tt.reqTrailer) }}
			}
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("read body: %v", err)
			}
			if resp.StatusCode != 200 || string(got) != tt.wantBody {
				t.Fatalf("status %d body %d bytes %.20q, want 200 %.20q", resp.StatusCode, len(got), got, tt.wantBody)
			}
			if resp.Proto != "HTTP/3.0" || resp.ProtoMajor != 3 {
				t.Errorf("Proto %q %d, want HTTP/3.0 3", resp.Proto, resp.ProtoMajor)
			}
			if resp.Request != req {
				t.Error("resp.Request is not the caller's request")
			}
			if resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h3" {
				t.Errorf("resp.TLS = %+v, want negotiated h3", resp.TLS)
			}
			if m := resp.Header.Get("X-Method"); m != tt.method {
				t.Errorf("server saw method %q", m)
			}
			if tr := resp.Trailer.Get("X-Echo-Trailer"); tr != tt.wantTrailer {
				t.Errorf("response trailer %q, want %q", tr, tt.wantTrailer)
			}
			if got := resp.Header.Get("X-Req-Trailer"); got != tt.reqTrailer {
				t.Errorf("server saw request trailer %q, want %q", got, tt.reqTrailer)
			}
		})
	}
	if _, idle := c.IdleSince(); !idle {
		t.Error("connection not idle after every body was read")
	}
}

// TestAlternativeAuthorityAndSNI connects to 127.0.0.1:port (the alternative)
// for origin "localhost": the certificate is checked for localhost, SNI is
// localhost and the server sees Host localhost.
func TestAlternativeAuthorityAndSNI(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost") // no IP SAN
	d := newTestDialer(t, s, nil)
	c, err := d.Dial(context.Background(), "localhost:8443", s.addr())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	req, _ := http.NewRequest("GET", "https://localhost:8443/x", nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if h := resp.Header.Get("X-Host"); h != "localhost:8443" {
		t.Errorf("server saw Host %q, want the origin localhost:8443", h)
	}
	if snis := s.serverNames(); len(snis) != 1 || snis[0] != "localhost" {
		t.Errorf("server saw SNI %q, want [localhost]", snis)
	}
	if got := c.RemoteAddr().String(); got != s.addr() {
		t.Errorf("connected to %s, want the alternative %s", got, s.addr())
	}
}

func TestDialCertificateMustMatchOrigin(t *testing.T) {
	tests := []struct {
		name      string
		certHosts []string
		trusted   bool
		insecure  bool
		wantErr   bool
	}{
		{name: "cert_for_origin", certHosts: []string{"localhost"}, trusted: true},
		{name: "cert_for_alt_ip_only", certHosts: []string{"127.0.0.1"}, trusted: true, wantErr: true},
		{name: "cert_for_other_name", certHosts: []string{"other.example"}, trusted: true, wantErr: true},
		{name: "untrusted_root", certHosts: []string{"localhost"}, wantErr: true},
		{name: "insecure_skip_verify_respected", certHosts: []string{"other.example"}, insecure: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startH3(t, http.HandlerFunc(echoHandler), tt.certHosts...)
			tlsConf := s.clientConfig()
			if !tt.trusted {
				tlsConf.RootCAs = nil
			}
			tlsConf.InsecureSkipVerify = tt.insecure
			tlsConf.NextProtos = []string{"h2", "http/1.1"} // must be replaced by h3
			d := NewDialer(Config{TLSConfig: tlsConf})
			defer d.Close()
			c, err := d.Dial(context.Background(), "localhost", s.addr())
			if tt.wantErr {
				if err == nil {
					t.Fatal("Dial succeeded with a certificate not valid for the origin")
				}
				if !strings.Contains(err.Error(), "localhost") || !strings.Contains(err.Error(), s.addr()) {
					t.Errorf("error %q does not name origin and alternative", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			if tlsConf.NextProtos[0] != "h2" {
				t.Error("the caller's TLS config was modified")
			}
			c.Close()
		})
	}
}

func TestDialBadArguments(t *testing.T) {
	d := NewDialer(Config{})
	defer d.Close()
	tests := []struct{ origin, alt string }{
		{"", "127.0.0.1:443"},
		{"localhost", "127.0.0.1"},
		{"localhost", "127.0.0.1:0"},
		{"localhost", "127.0.0.1:70000"},
		{"localhost", "127.0.0.1:http"},
		{"localhost", ""},
	}
	for _, tt := range tests {
		if c, err := d.Dial(context.Background(), tt.origin, tt.alt); err == nil {
			c.Close()
			t.Errorf("Dial(%q, %q) succeeded", tt.origin, tt.alt)
		}
	}
	if d.LocalAddr() != nil {
		t.Error("a socket was opened for invalid arguments")
	}
}

func TestGzip(t *testing.T) {
	const text = "compressible compressible compressible"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		if r.Header.Get("Accept-Encoding") != "gzip" {
			io.WriteString(w, text)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, text)
		zw.Close()
	})
	s := startH3(t, h, "localhost")
	tests := []struct {
		name         string
		disable      bool
		method       string
		wantAsked    string
		uncompressed bool
	}{
		{name: "default_asks_and_decodes", method: "GET", wantAsked: "gzip", uncompressed: true},
		{name: "disabled", disable: true, method: "GET"},
		{name: "head_never_asks", method: "HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDialer(t, s, func(c *Config) { c.DisableCompression = tt.disable })
			c := dialTest(t, d, s)
			req, _ := http.NewRequest(tt.method, "https://localhost/", nil)
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := resp.Header.Get("X-Accept-Encoding"); got != tt.wantAsked {
				t.Errorf("server saw Accept-Encoding %q, want %q", got, tt.wantAsked)
			}
			if resp.Uncompressed != tt.uncompressed {
				t.Errorf("Uncompressed = %v", resp.Uncompressed)
			}
			if tt.method != "HEAD" && string(body) != text {
				t.Errorf("body %q", body)
			}
			if tt.uncompressed && (resp.Header.Get("Content-Encoding") != "" || resp.ContentLength != -1) {
				t.Errorf("decoded response keeps Content-Encoding %q / ContentLength %d", resp.Header.Get("Content-Encoding"), resp.ContentLength)
			}
		})
	}
}

func TestMaxResponseHeaderBytes(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("b", 8<<10))
		io.WriteString(w, "ok")
	})
	s := startH3(t, h, "localhost")
	tests := []struct {
		name    string
		limit   int64
		wantErr bool
	}{
		{name: "default_10MiB", limit: 0},
		{name: "under_limit", limit: 64 << 10},
		{name: "over_limit", limit: 4 << 10, wantErr: true},
		{name: "compressed_under_decoded_over", limit: 7 << 10, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDialer(t, s, func(c *Config) { c.MaxResponseHeaderBytes = tt.limit })
			c := dialTest(t, d, s)
			req, _ := http.NewRequest("GET", "https://localhost/", nil)
			resp, err := c.RoundTrip(req)
			if !tt.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return
			}
			if err == nil {
				resp.Body.Close()
				t.Fatal("a response head over the limit was accepted")
			}
			if IsRetryable(err) {
				t.Errorf("oversized head reported retryable: %v", err)
			}
			t.Logf("error: %v", err)
			if _, idle := c.IdleSince(); !idle {
				t.Error("stream slot not released after the error")
			}
		})
	}
}

func TestTraceHooks(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	d := newTestDialer(t, s, nil)

	var mu sync.Mutex
	var events []string
	var gotConns []httptrace.GotConnInfo
	add := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	trace := &httptrace.ClientTrace{
		ConnectStart:      func(network, addr string) { add("ConnectStart " + network) },
		ConnectDone:       func(network, addr string, err error) { add(fmt.Sprintf("ConnectDone %v", err)) },
		TLSHandshakeStart: func() { add("TLSHandshakeStart") },
		TLSHandshakeDone: func(st tls.ConnectionState, err error) {
			add(fmt.Sprintf("TLSHandshakeDone %s %v", st.NegotiatedProtocol, err))
		},
		GotConn:              func(i httptrace.GotConnInfo) { mu.Lock(); gotConns = append(gotConns, i); mu.Unlock(); add("GotConn") },
		WroteHeaders:         func() { add("WroteHeaders") },
		WroteRequest:         func(i httptrace.WroteRequestInfo) { add(fmt.Sprintf("WroteRequest %v", i.Err)) },
		GotFirstResponseByte: func() { add("GotFirstResponseByte") },
	}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	c, err := d.Dial(ctx, "localhost", s.addr())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://localhost/", nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"ConnectStart udp", "TLSHandshakeStart", "TLSHandshakeDone h3 <nil>", "ConnectDone <nil>",
		"GotConn", "WroteHeaders", "WroteRequest <nil>", "GotFirstResponseByte",
		"GotConn", "WroteHeaders", "WroteRequest <nil>", "GotFirstResponseByte",
	}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("hooks fired\n %q\nwant\n %q", events, want)
	}
	if len(gotConns) != 2 || gotConns[0].Reused || !gotConns[1].Reused || !gotConns[1].WasIdle {
		t.Fatalf("GotConn infos %+v: want first fresh, second reused and idle", gotConns)
	}
	if gotConns[1].Conn.RemoteAddr().String() != s.addr() {
		t.Errorf("GotConn conn remote %v", gotConns[1].Conn.RemoteAddr())
	}
	if _, err := gotConns[1].Conn.Write([]byte("x")); err == nil {
		t.Error("GotConn's net.Conn allowed a write")
	}
	if err := gotConns[1].Conn.Close(); err == nil || !c.Usable() {
		t.Error("GotConn's net.Conn Close must fail and not touch the shared connection")
	}
}

func TestConcurrentRequestsShareOneConn(t *testing.T) {
	const n = 64
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	d := newTestDialer(t, s, nil)
	c := dialTest(t, d, s)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if !c.ReserveStream() {
				errs <- errors.New("ReserveStream refused below the cap")
				return
			}
			body := fmt.Sprintf("request-%d", i)
			req, _ := http.NewRequest("POST", "https://localhost/", strings.NewReader(body))
			resp, err := c.RoundTrip(req)
			if err != nil {
				errs <- err
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(got) != body {
				errs <- fmt.Errorf("body %q err %v, want %q", got, err, body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, idle := c.IdleSince(); !idle {
		t.Error("not idle after all requests")
	}
}

func TestCancelOneRequest(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, "fast")
	})
	s := startH3(t, h, "localhost")
	defer close(release)
	d := newTestDialer(t, s, nil)
	c := dialTest(t, d, s)

	tests := []struct {
		name   string
		cancel string // "before_response" or "during_body"
	}{
		{name: "before_response", cancel: "before_response"},
		{name: "during_body", cancel: "during_body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tt.cancel == "before_response" {
				cancel()
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://localhost/slow", nil)
			resp, err := c.RoundTrip(req)
			if tt.cancel == "before_response" {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
				if IsRetryable(err) {
					t.Error("cancellation reported retryable")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				cancel()
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil {
					t.Fatal("body read succeeded after cancel")
				}
			}
			cancel()
			// The connection still serves other requests.
			req2, _ := http.NewRequest("GET", "https://localhost/fast", nil)
			resp2, err := c.RoundTrip(req2)
			if err != nil {
				t.Fatalf("request after a cancelled one: %v", err)
			}
			got, _ := io.ReadAll(resp2.Body)
			resp2.Body.Close()
			if string(got) != "fast" {
				t.Fatalf("body %q", got)
			}
			if _, idle := c.IdleSince(); !idle {
				t.Error("stream slots leaked by the cancelled request")
			}
		})
	}
}

// TestAlternativeNamedByHost: the alternative names a host of its own; it is
// resolved through Config.LookupNetIP and the certificate is still checked
// for the origin.
func TestAlternativeNamedByHost(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	_, port, _ := net.SplitHostPort(s.addr())
	tests := []struct {
		name    string
		lookup  func(context.Context, string) ([]netip.Addr, error)
		wantErr bool
	}{
		{name: "resolved", lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			if host != "alt.test" {
				return nil, fmt.Errorf("looked up %q", host)
			}
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
		}},
		{name: "lookup_fails", lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}, wantErr: true},
		{name: "no_addresses", lookup: func(context.Context, string) ([]netip.Addr, error) { return nil, nil }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDialer(t, s, func(c *Config) { c.LookupNetIP = tt.lookup })
			c, err := d.Dial(context.Background(), "localhost", net.JoinHostPort("alt.test", port))
			if tt.wantErr {
				if _, ok := errors.AsType[*net.DNSError](err); !ok {
					t.Fatalf("err = %v, want a *net.DNSError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req, _ := http.NewRequest("GET", "https://localhost/", nil)
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if h := resp.Header.Get("X-Host"); h != "localhost" {
				t.Errorf("server saw Host %q", h)
			}
		})
	}
}
