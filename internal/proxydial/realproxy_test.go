package proxydial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

func TestTinyproxy(t *testing.T) {
	tlsOrigin := newOrigin(t, true)
	plainOrigin := newOrigin(t, false)
	_, portS, _ := net.SplitHostPort(tlsOrigin.addr())
	var connectPort int
	fmt.Sscan(portS, &connectPort)
	addr := testpeer.Tinyproxy(t, connectPort, testUser, testPassword)

	t.Run("CONNECT with credentials to a TLS origin", func(t *testing.T) {
		conn, err := Tunnel(context.Background(), proxyURL("http", addr, true), tlsOrigin.addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, body, err := getOver(conn, tlsOrigin.addr(), tlsOrigin.clientTLS("127.0.0.1"))
		if err != nil || code != 200 || body != "hello from origin" {
			t.Fatalf("%d %q %v", code, body, err)
		}
	})
	t.Run("CONNECT without credentials is 407", func(t *testing.T) {
		_, err := Tunnel(context.Background(), proxyURL("http", addr, false), tlsOrigin.addr(), nil)
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 407 || se.Status == "" {
			t.Fatalf("want *StatusError 407, got %v", err)
		}
	})
	// tinyproxy answers bad credentials with 401, missing ones with 407.
	t.Run("wrong password is refused and never echoed", func(t *testing.T) {
		u := proxyURL("http", addr, true)
		u.User = url.UserPassword(testUser, testPassword+"-wrong")
		_, err := Tunnel(context.Background(), u, tlsOrigin.addr(), nil)
		assertNoSecret(t, err)
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 401 || se.Status != "Unauthorized" {
			t.Fatalf("want *StatusError 401 Unauthorized, got %v", err)
		}
	})
	t.Run("CONNECT to a port not allowed", func(t *testing.T) {
		_, err := Tunnel(context.Background(), proxyURL("http", addr, true), plainOrigin.addr(), nil)
		assertNoSecret(t, err)
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 403 {
			t.Fatalf("want *StatusError 403, got %v", err)
		}
	})
	t.Run("absolute-form http request", func(t *testing.T) {
		conn, err := DialProxy(context.Background(), proxyURL("http", addr, true), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, body, err := getViaForwardingProxy(conn, plainOrigin.addr(), proxyURL("http", addr, true))
		if err != nil || code != 200 || body != "hello from origin" {
			t.Fatalf("%d %q %v", code, body, err)
		}
	})
}

func TestDante(t *testing.T) {
	tlsOrigin := newOrigin(t, true)
	addr := testpeer.Dante(t)
	_, port, _ := net.SplitHostPort(tlsOrigin.addr())
	cases := []struct {
		name   string
		scheme string
		target string
		cfg    *Config
		ok     bool
	}{
		{"socks5h, proxy resolves localhost", "socks5h", net.JoinHostPort("localhost", port), nil, true},
		{"socks5, IP target", "socks5", tlsOrigin.addr(), nil, true},
		{"socks5, resolved locally", "socks5", net.JoinHostPort("localhost", port), &Config{LookupSOCKS5: lookupLocalhost}, true},
		{"target refuses", "socks5h", testpeer.RefusingAddr(t), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := Tunnel(context.Background(), proxyURL(tc.scheme, addr, false), tc.target, tc.cfg)
			if !tc.ok {
				if err == nil {
					conn.Close()
					t.Fatal("want an error")
				}
				if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "refused") {
					t.Fatalf("error should name the proxy and the SOCKS failure: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			host, _, _ := net.SplitHostPort(tc.target)
			code, body, err := getOver(conn, tc.target, tlsOrigin.clientTLS(host))
			if err != nil || code != 200 || body != "hello from origin" {
				t.Fatalf("%d %q %v", code, body, err)
			}
		})
	}
}
