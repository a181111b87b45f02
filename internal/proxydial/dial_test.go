package proxydial

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

func TestProxyUnreachable(t *testing.T) {
	addr := testpeer.RefusingAddr(t)
	for _, scheme := range []string{"http", "https", "socks5", "socks5h"} {
		t.Run(scheme, func(t *testing.T) {
			_, err := Tunnel(context.Background(), proxyURL(scheme, addr, true), "127.0.0.1:9", nil)
			assertNoSecret(t, err)
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "proxyconnect" {
				t.Fatalf("want *net.OpError proxyconnect (as net/http), got %v", err)
			}
			if !strings.Contains(err.Error(), "proxy "+addr) {
				t.Errorf("error does not name the proxy %s: %v", addr, err)
			}
			if scheme == "http" || scheme == "https" {
				_, err := DialProxy(context.Background(), proxyURL(scheme, addr, true), nil)
				assertNoSecret(t, err)
				if !errors.As(err, &op) || op.Op != "proxyconnect" {
					t.Fatalf("DialProxy: want proxyconnect error, got %v", err)
				}
			}
		})
	}
}

func TestHTTPSProxyTLSFailures(t *testing.T) {
	srvTLS, cliTLS := proxyTLS(t)
	p := newHTTPProxy(t, "", srvTLS)
	quiet := serveLoopback(t, nil, func(c net.Conn) { io.Copy(io.Discard, c) })
	wrongName := cliTLS.Clone()
	wrongName.ServerName = "not-the-proxy.example"
	cases := []struct {
		name  string
		addr  string
		cfg   *Config
		check func(*testing.T, error)
	}{
		{"untrusted proxy certificate", p.addr(), &Config{}, wantErrContains("certificate")},
		{"certificate for another name", p.addr(), &Config{TLSClientConfig: wrongName}, wantErrContains("not-the-proxy.example")},
		{"handshake timeout", quiet.Addr().String(), &Config{TLSClientConfig: cliTLS, TLSHandshakeTimeout: 50 * time.Millisecond},
			func(t *testing.T, err error) {
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					t.Fatalf("want a net.Error with Timeout(), got %v", err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Tunnel(context.Background(), proxyURL("https", tc.addr, true), "127.0.0.1:9", tc.cfg)
			assertNoSecret(t, err)
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "proxyconnect" || !strings.Contains(err.Error(), tc.addr) {
				t.Fatalf("want proxyconnect error naming %s, got %v", tc.addr, err)
			}
			tc.check(t, err)
		})
	}
}

func TestDialProxyForwardsHTTPTargets(t *testing.T) {
	srvTLS, cliTLS := proxyTLS(t)
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme+" proxy", func(t *testing.T) {
			o := newOrigin(t, false)
			pu := proxyURL(scheme, "", true)
			var serverTLS = srvTLS
			if scheme == "http" {
				serverTLS = nil
			}
			p := newHTTPProxy(t, AuthHeader(pu), serverTLS)
			pu.Host = p.addr()
			if !Forwards(pu, "http") {
				t.Fatal("Forwards(http target) = false")
			}
			conn, err := DialProxy(context.Background(), pu, &Config{TLSClientConfig: cliTLS})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req, _ := http.NewRequest("GET", "http://"+o.addr()+"/path?q=1", nil)
			req.Header.Set("Proxy-Authorization", AuthHeader(pu))
			if err := req.WriteProxy(conn); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			reqs := p.requests()
			if len(reqs) != 1 || reqs[0].URI != AbsoluteURI(req.URL, o.addr()) || reqs[0].URI != "http://"+o.addr()+"/path?q=1" {
				t.Fatalf("proxy saw %+v", reqs)
			}
		})
	}
	t.Run("socks5 does not forward", func(t *testing.T) {
		_, err := DialProxy(context.Background(), proxyURL("socks5", "127.0.0.1:1080", true), nil)
		if !errors.Is(err, ErrNotForwarding) {
			t.Fatalf("want ErrNotForwarding, got %v", err)
		}
	})
}

func TestDialHookReturningNilNil(t *testing.T) {
	cfg := &Config{Dial: func(context.Context, string, string) (net.Conn, error) { return nil, nil }}
	_, err := Tunnel(context.Background(), proxyURL("http", "127.0.0.1:1", true), "127.0.0.1:9", cfg)
	if err == nil || !strings.Contains(err.Error(), "(nil, nil)") {
		t.Fatalf("want a (nil, nil) error, got %v", err)
	}
}
