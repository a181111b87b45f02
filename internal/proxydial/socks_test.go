package proxydial

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestSOCKS5(t *testing.T) {
	lookupLoopback := func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host != "localhost" {
			return nil, errors.New("unexpected host " + host)
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	lookupFails := func(ctx context.Context, host string) ([]netip.Addr, error) {
		return nil, errors.New("no such host")
	}
	cases := []struct {
		name        string
		scheme      string
		serverUser  string // server requires these credentials when set
		serverPass  string
		replyCode   byte
		withCreds   bool
		lookup      func(context.Context, string) ([]netip.Addr, error)
		useTLS      bool
		wantTarget  string // "fqdn" or "ip": how the proxy was given the target
		wantErrText string
	}{
		{name: "socks5h, no auth, proxy resolves", scheme: "socks5h", wantTarget: "fqdn"},
		{name: "socks5 without LookupSOCKS5 passes the name like net/http", scheme: "socks5", wantTarget: "fqdn"},
		{name: "socks5 with LookupSOCKS5 resolves locally", scheme: "socks5", lookup: lookupLoopback, wantTarget: "ip"},
		{name: "socks5h ignores LookupSOCKS5", scheme: "socks5h", lookup: lookupFails, wantTarget: "fqdn"},
		{name: "socks5 local lookup failure", scheme: "socks5", lookup: lookupFails, wantErrText: "no such host"},
		{name: "user/password accepted", scheme: "socks5h", serverUser: testUser, serverPass: testPassword, withCreds: true, wantTarget: "fqdn"},
		{name: "TLS target through socks5h", scheme: "socks5h", serverUser: testUser, serverPass: testPassword, withCreds: true, useTLS: true, wantTarget: "fqdn"},
		{name: "user/password rejected", scheme: "socks5h", serverUser: testUser, serverPass: "other", withCreds: true, wantErrText: "authentication failed"},
		{name: "auth required, none offered", scheme: "socks5h", serverUser: testUser, serverPass: testPassword, wantErrText: "no acceptable authentication methods"},
		{name: "failure code: ruleset", scheme: "socks5h", replyCode: 2, wantErrText: "connection not allowed by ruleset"},
		{name: "failure code: host unreachable", scheme: "socks5h", replyCode: 4, wantErrText: "host unreachable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrigin(t, tc.useTLS)
			s := newSOCKSServer(t, tc.serverUser, tc.serverPass, tc.replyCode)
			_, port, _ := net.SplitHostPort(o.addr())
			target := net.JoinHostPort("localhost", port)
			cfg := &Config{LookupSOCKS5: tc.lookup}
			conn, err := Tunnel(context.Background(), proxyURL(tc.scheme, s.addr(), tc.withCreds), target, cfg)
			assertNoSecret(t, err)
			if tc.wantErrText != "" {
				if err == nil {
					conn.Close()
					t.Fatal("want an error")
				}
				if !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("error %q lacks %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var tlsCfg *tls.Config
			if tc.useTLS {
				tlsCfg = o.clientTLS("localhost")
			}
			code, body, err := getOver(conn, target, tlsCfg)
			if err != nil || code != 200 || body != "hello from origin" {
				t.Fatalf("through socks: %d %q %v", code, body, err)
			}
			seen := s.seenTargets()
			if len(seen) != 1 || !strings.HasPrefix(seen[0], tc.wantTarget+":") {
				t.Fatalf("proxy was given %v, want a %s target", seen, tc.wantTarget)
			}
		})
	}
}

func TestSOCKS5Bounded(t *testing.T) {
	silent := serveLoopback(t, nil, func(c net.Conn) { c.Read(make([]byte, 64)); c.Read(make([]byte, 64)) })
	cases := []struct {
		name string
		cfg  *Config
		ctx  func() (context.Context, context.CancelFunc)
		want error // in the chain; the error's own Timeout() is want's
	}{
		{"ConnectTimeout", &Config{ConnectTimeout: 50 * time.Millisecond}, func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, context.DeadlineExceeded},
		{"ctx deadline", nil, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		// The SOCKS dialer interrupts the handshake with a past deadline,
		// an i/o timeout: the error is still no timeout.
		{"ctx cancelled", nil, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := Tunnel(ctx, proxyURL("socks5h", silent.Addr().String(), true), "localhost:9", tc.cfg)
			assertNoSecret(t, err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			// url.Error.Timeout asserts on the error itself, not its chain.
			te, ok := err.(interface{ Timeout() bool })
			if want := tc.want == context.DeadlineExceeded; !ok || te.Timeout() != want {
				t.Fatalf("%T %v: Timeout() should be %v", err, err, want)
			}
		})
	}
}
