package proxydial

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestTunnelReachesTLSTarget(t *testing.T) {
	srvTLS, cliTLS := proxyTLS(t)
	cases := []struct {
		name      string
		scheme    string
		withCreds bool
	}{
		{"http proxy, no credentials", "http", false},
		{"http proxy, basic auth", "http", true},
		{"https proxy, basic auth", "https", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrigin(t, true)
			var serverTLS = srvTLS
			if tc.scheme == "http" {
				serverTLS = nil
			}
			pu := proxyURL(tc.scheme, "", tc.withCreds)
			wantAuth := AuthHeader(proxyURL(tc.scheme, "", tc.withCreds))
			p := newHTTPProxy(t, wantAuth, serverTLS)
			pu.Host = p.addr()
			cfg := &Config{
				TLSClientConfig:    cliTLS,
				ProxyConnectHeader: http.Header{"X-Connect": {"yes"}},
			}
			conn, err := Tunnel(context.Background(), pu, o.addr(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			code, body, err := getOver(conn, o.addr(), o.clientTLS("127.0.0.1"))
			if err != nil || code != 200 || body != "hello from origin" {
				t.Fatalf("through tunnel: %d %q %v", code, body, err)
			}
			reqs := p.requests()
			if len(reqs) != 1 {
				t.Fatalf("proxy saw %d requests, want 1 CONNECT", len(reqs))
			}
			r := reqs[0]
			if r.Method != "CONNECT" || r.URI != o.addr() || r.Host != o.addr() {
				t.Errorf("CONNECT line: %+v", r)
			}
			if r.ProxyAuth != wantAuth || r.UserAgent != "Go-http-client/1.1" || r.Header.Get("X-Connect") != "yes" {
				t.Errorf("CONNECT headers: auth %q UA %q X-Connect %q", r.ProxyAuth, r.UserAgent, r.Header.Get("X-Connect"))
			}
			if _, ok := cfg.ProxyConnectHeader["Proxy-Authorization"]; ok {
				t.Error("Tunnel modified Config.ProxyConnectHeader")
			}
		})
	}
}

func TestTunnelProxyReplies(t *testing.T) {
	write := func(s string) func(net.Conn) {
		return func(c net.Conn) { io.WriteString(c, s) }
	}
	silent := func(c net.Conn) { io.Copy(io.Discard, c) }
	cases := []struct {
		name    string
		reply   func(net.Conn)
		cfg     Config
		check   func(t *testing.T, err error)
		tunnel  string // expected first bytes read from the tunnel on success
		timeout time.Duration
	}{
		{name: "407 with status text", reply: write("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"x\"\r\nContent-Length: 0\r\n\r\n"),
			check: func(t *testing.T, err error) {
				var se *StatusError
				if !errors.As(err, &se) || se.StatusCode != 407 || se.Status != "Proxy Authentication Required" || se.Header.Get("Proxy-Authenticate") == "" {
					t.Fatalf("want *StatusError 407, got %#v (%v)", se, err)
				}
				if !strings.Contains(err.Error(), "407 Proxy Authentication Required") {
					t.Errorf("message lacks the status: %v", err)
				}
			}},
		{name: "status without text", reply: write("HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n"),
			check: func(t *testing.T, err error) {
				var se *StatusError
				if !errors.As(err, &se) || se.StatusCode != 503 || se.Status != "" {
					t.Fatalf("want *StatusError 503 without text, got %v", err)
				}
			}},
		{name: "non-HTTP reply", reply: write("SSH-2.0-OpenSSH\r\n\r\n"),
			check: wantErrContains("malformed HTTP")},
		{name: "bad status code", reply: write("HTTP/1.1 2x0 OK\r\n\r\n"),
			check: wantErrContains("malformed HTTP status code")},
		{name: "closed before replying", reply: func(net.Conn) {},
			check: wantErrIs(io.ErrUnexpectedEOF)},
		{name: "closed mid-status-line", reply: write("HTTP/1.1 200 Conn"),
			check: wantErrIs(io.ErrUnexpectedEOF)},
		{name: "closed mid-headers", reply: write("HTTP/1.1 200 OK\r\nVia: 1.1 proxy\r\n"),
			check: wantErrIs(io.ErrUnexpectedEOF)},
		{name: "head over the limit", reply: write("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 4096) + "\r\n\r\n"),
			cfg: Config{MaxResponseHeaderBytes: 1024}, check: wantErrContains("exceeds 1024 bytes")},
		{name: "silent proxy bounded by ConnectTimeout", reply: silent,
			cfg: Config{ConnectTimeout: 50 * time.Millisecond}, check: wantErrIs(context.DeadlineExceeded)},
		{name: "silent proxy bounded by ctx deadline", reply: silent, timeout: 50 * time.Millisecond,
			check: wantErrIs(context.DeadlineExceeded)},
		{name: "bytes after 200 are kept", reply: write("HTTP/1.1 200 Connection established\r\n\r\nEARLY-BYTES"),
			tunnel: "EARLY-BYTES"},
		{name: "200 with headers, bytes after", reply: write("HTTP/1.1 200 OK\r\nVia: 1.1 proxy\r\nProxy-Agent: x\r\n\r\n\x16\x03\x01"),
			tunnel: "\x16\x03\x01"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newScriptedProxy(t, tc.reply)
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			conn, err := Tunnel(ctx, proxyURL("http", p.addr(), true), "127.0.0.1:9", &tc.cfg)
			assertNoSecret(t, err)
			if tc.tunnel == "" {
				if err == nil {
					conn.Close()
					t.Fatal("Tunnel succeeded, want an error")
				}
				if !strings.Contains(err.Error(), p.addr()) {
					t.Errorf("error does not name the proxy %s: %v", p.addr(), err)
				}
				tc.check(t, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			got := make([]byte, len(tc.tunnel))
			if _, err := io.ReadFull(conn, got); err != nil || string(got) != tc.tunnel {
				t.Fatalf("tunnel read %q, %v; want %q", got, err, tc.tunnel)
			}
			if !strings.HasPrefix(p.lastHead(), "CONNECT 127.0.0.1:9 HTTP/1.1\r\n") {
				t.Errorf("request head: %q", p.lastHead())
			}
		})
	}
}

func wantErrIs(target error) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("error %v: want errors.Is %v", err, target)
		}
	}
}

func wantErrContains(s string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Fatalf("error %v: want it to contain %q", err, s)
		}
	}
}

func TestTunnelCancelledMidConnect(t *testing.T) {
	arrived := make(chan struct{})
	p := newScriptedProxy(t, func(c net.Conn) {
		close(arrived)
		io.Copy(io.Discard, c)
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := Tunnel(ctx, proxyURL("http", p.addr(), true), "127.0.0.1:9", nil)
	assertNoSecret(t, err)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestTunnelConnectHeaders(t *testing.T) {
	errHook := errors.New("hook says no")
	okReply := func(c net.Conn) { io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n") }
	cases := []struct {
		name      string
		withCreds bool
		cfg       func(t *testing.T) *Config
		wantErr   error
		wantLines []string // lines the CONNECT head must contain
		denyLines []string // lines it must not contain
	}{
		{name: "GetProxyConnectHeader replaces ProxyConnectHeader", cfg: func(t *testing.T) *Config {
			return &Config{
				ProxyConnectHeader: http.Header{"X-Static": {"1"}},
				GetProxyConnectHeader: func(ctx context.Context, pu *url.URL, target string) (http.Header, error) {
					if target != "127.0.0.1:9" {
						t.Errorf("GetProxyConnectHeader target %q", target)
					}
					return http.Header{"X-Dynamic": {"2"}}, nil
				},
			}
		}, wantLines: []string{"X-Dynamic: 2"}, denyLines: []string{"X-Static"}},
		{name: "GetProxyConnectHeader nil header", cfg: func(t *testing.T) *Config {
			return &Config{GetProxyConnectHeader: func(context.Context, *url.URL, string) (http.Header, error) { return nil, nil }}
		}, wantLines: []string{"Host: 127.0.0.1:9"}},
		{name: "GetProxyConnectHeader error", cfg: func(t *testing.T) *Config {
			return &Config{GetProxyConnectHeader: func(context.Context, *url.URL, string) (http.Header, error) { return nil, errHook }}
		}, wantErr: errHook},
		{name: "URL credentials override a configured Proxy-Authorization", withCreds: true, cfg: func(t *testing.T) *Config {
			return &Config{ProxyConnectHeader: http.Header{"Proxy-Authorization": {"Bearer other"}}}
		}, wantLines: []string{"Proxy-Authorization: " + AuthHeader(proxyURL("http", "", true))}, denyLines: []string{"Bearer other"}},
		{name: "configured Proxy-Authorization kept without URL credentials", cfg: func(t *testing.T) *Config {
			return &Config{ProxyConnectHeader: http.Header{"Proxy-Authorization": {"Bearer token"}}}
		}, wantLines: []string{"Proxy-Authorization: Bearer token"}},
		{name: "OnProxyConnectResponse sees the response and can refuse", withCreds: true, cfg: func(t *testing.T) *Config {
			return &Config{OnProxyConnectResponse: func(ctx context.Context, pu *url.URL, req *http.Request, res *http.Response) error {
				if req.Method != "CONNECT" || res.StatusCode != 200 || pu.User == nil {
					t.Errorf("OnProxyConnectResponse got %s / %d", req.Method, res.StatusCode)
				}
				return errHook
			}}
		}, wantErr: errHook},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newScriptedProxy(t, okReply)
			cfg := tc.cfg(t)
			before := cfg.ProxyConnectHeader.Clone()
			conn, err := Tunnel(context.Background(), proxyURL("http", p.addr(), tc.withCreds), "127.0.0.1:9", cfg)
			assertNoSecret(t, err)
			if conn != nil {
				conn.Close()
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("want %v, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			head := p.lastHead()
			for _, l := range tc.wantLines {
				if !strings.Contains(head, l+"\r\n") {
					t.Errorf("CONNECT head lacks %q:\n%s", l, head)
				}
			}
			for _, l := range tc.denyLines {
				if strings.Contains(head, l) {
					t.Errorf("CONNECT head has %q:\n%s", l, head)
				}
			}
			if len(before) != len(cfg.ProxyConnectHeader) || before.Get("Proxy-Authorization") != cfg.ProxyConnectHeader.Get("Proxy-Authorization") {
				t.Errorf("ProxyConnectHeader modified: %v -> %v", before, cfg.ProxyConnectHeader)
			}
		})
	}
}
