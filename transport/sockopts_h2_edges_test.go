package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/ferryhttp/ferry/internal/idlepool"
	"github.com/ferryhttp/ferry/internal/sockopt"
)

// Edges of socket options over shared connections that the main tests
// (sockopts_h2_test.go) leave open: every option of a request is checked
// up front, the connections ferry makes shared without TLS from its own
// dialer (h2c) or from a caller's DialTLSContext get a guard, a failed
// apply gives back exactly its own stream, and a caller's TLSNextProto
// connection keeps the dialer's guard and its CloseIdleConnections.

// TestSocketOptionsLaterInvalidOption: an invalid option after valid ones
// fails the request before a connection is looked for, over every
// protocol, as a lone invalid option does.
func TestSocketOptionsLaterInvalidOption(t *testing.T) {
	cert := h3Cert(t)
	wantErr := sockopt.Validate(sockopt.UserTimeout, -1000)
	if wantErr == nil {
		t.Fatal("TCP_USER_TIMEOUT -1000 validates")
	}
	h2srv := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), cert)
	h3u := startWrapped(t, &protoHandler{})
	tests := []struct {
		proto string
		u     string
		tr    func(t *testing.T) *Transport
	}{
		{"HTTP/1.1", h2srv.URL, func(t *testing.T) *Transport { return newH3Transport(t, nil) }},
		{"HTTP/2.0", h2srv.URL, func(t *testing.T) *Transport {
			return newH3Transport(t, func(tr *Transport) { tr.ForceAttemptHTTP2 = true })
		}},
		{"HTTP/3.0", h3u, func(t *testing.T) *Transport { return newH3Transport(t, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.proto, func(t *testing.T) {
			tr := tt.tr(t)
			if resp, _, err := sockOptGet(t, tr, tt.u, nil); err != nil {
				t.Fatal(err)
			} else if tt.proto == "HTTP/3.0" {
				eventually(t, "the QUIC handshake", func() bool { return h3Ready(t, tr, tt.u) })
			} else if resp.Proto != tt.proto {
				t.Fatalf("warm-up over %s, want %s", resp.Proto, tt.proto)
			}
			_, got, err := sockOptGet(t, tr, tt.u, nil, TOS(0x10), TCPNoDelay(true), TCPUserTimeout(-time.Second))
			if !errors.Is(err, sockopt.ErrInvalidValue) || err.Error() != wantErr.Error() {
				t.Fatalf("err %v, want %q", err, wantErr)
			}
			if got.asked || got.conn != nil {
				t.Fatal("a connection was looked for or taken for a request with an invalid option")
			}
		})
	}
}

// TestSocketOptionsSharedConnKinds: the options reach the TCP socket of an
// HTTP/2 connection with prior knowledge (h2c, ferry's dialer and its
// guard) and of one whose *tls.Conn came from a caller's DialTLSContext (a
// guard made for the socket under the TLS).
func TestSocketOptionsSharedConnKinds(t *testing.T) {
	cert := h3Cert(t)
	tests := []struct {
		name        string
		kind        h2ServerKind
		mod         func(tr *Transport)
		dialerGuard bool // the dialer's guard, which knows TCP_NODELAY
	}{
		{"h2c-prior-knowledge", h2ServerKind{h2c: true}, func(tr *Transport) {
			tr.Protocols = protocolsOf("h2c")
		}, true},
		{"caller-dialtls", h2ServerKind{tlsH2: true}, func(tr *Transport) {
			tr.ForceAttemptHTTP2 = true
			tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				cfg := cert.ClientConfig()
				cfg.ServerName = "127.0.0.1"
				cfg.NextProtos = []string{"h2", "http/1.1"}
				tc := tls.Client(c, cfg)
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				return tc, nil
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startH2Server(t, tt.kind, static(hello), cert)
			tr := newH3Transport(t, tt.mod)
			var conn net.Conn
			for _, tos := range []int{0x10, 0x28} {
				resp, got, err := sockOptGet(t, tr, srv.URL, nil, TOS(tos))
				if err != nil || resp.Proto != "HTTP/2.0" {
					t.Fatalf("TOS(%#x): %v, %v; want HTTP/2.0", tos, resp, err)
				}
				if conn == nil {
					conn = got.conn
				} else if got.conn != conn {
					t.Fatal("the requests did not share one connection")
				}
				if v := sockReadback(t, conn, unix.IPPROTO_IP, unix.IP_TOS); v != tos {
					t.Fatalf("IP_TOS %#x, want %#x", v, tos)
				}
			}
			if _, known := sharedGuard(t, tr, srv.URL).Get(sockopt.NoDelay); known != tt.dialerGuard {
				t.Fatalf("guard knows TCP_NODELAY: %v, want %v", known, tt.dialerGuard)
			}
		})
	}
}

// TestSocketOptionsFailedApplyReleasesOwnStream: a request whose options
// cannot be applied to a shared HTTP/2 connection gives back its own
// stream and only it: a stream reserved by someone else stays reserved.
func TestSocketOptionsFailedApplyReleasesOwnStream(t *testing.T) {
	cert := h3Cert(t)
	srv := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), cert)
	tr := newH3Transport(t, func(tr *Transport) {
		tr.ForceAttemptHTTP2 = true
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			cfg := cert.ClientConfig()
			cfg.ServerName = "127.0.0.1"
			cfg.NextProtos = []string{"h2"}
			tc := tls.Client(opaqueConn{c}, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, err
			}
			return tc, nil
		}
	})
	if resp, _, err := sockOptGet(t, tr, srv.URL, nil); err != nil || resp.Proto != "HTTP/2.0" {
		t.Fatalf("warm-up: %v, %v; want HTTP/2.0", resp, err)
	}
	key, err := tr.connKeyFor(newReq(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := tr.pool.GetShared(key) // holds a stream, as a request would
	if !ok {
		t.Fatal("no shared connection pooled")
	}
	sc := s.(sharedConn)
	idle := func() bool { _, idle := sc.(idlepool.IdleReporter).IdleSince(); return idle }
	for i := 0; i < 3; i++ {
		if _, _, err := sockOptGet(t, tr, srv.URL, nil, TOS(0x10)); !errors.Is(err, sockopt.ErrUnsupported) {
			t.Fatalf("err %v, want sockopt.ErrUnsupported", err)
		}
		if idle() {
			t.Fatalf("failed request %d gave back a stream it did not hold", i)
		}
	}
	sc.ReleaseStream()
	if !idle() {
		t.Fatal("a failed request kept its stream")
	}
	if resp, _, err := sockOptGet(t, tr, srv.URL, nil); err != nil || resp.Proto != "HTTP/2.0" {
		t.Fatalf("after the failures: %v, %v; want HTTP/2.0", resp, err)
	}
}

// idleCountingRT is a caller's RoundTripper counting CloseIdleConnections.
type idleCountingRT struct {
	http.RoundTripper
	closeIdle *atomic.Int32
}

func (r idleCountingRT) CloseIdleConnections() { r.closeIdle.Add(1) }

// TestSocketOptionsTLSNextProtoConnLifecycle: the connection a caller's
// TLSNextProto RoundTripper serves (altShared) keeps the guard of ferry's
// dialer, and CloseIdleConnections still drops it and passes the call on,
// so the next request makes a new one.
func TestSocketOptionsTLSNextProtoConnLifecycle(t *testing.T) {
	srv := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), h3Cert(t))
	var made, closeIdle atomic.Int32
	tr := newH3Transport(t, func(tr *Transport) {
		tr.TLSClientConfig.NextProtos = []string{"h2", "http/1.1"}
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{
			"h2": func(_ string, c *tls.Conn) http.RoundTripper {
				made.Add(1)
				cc, err := (&http2.Transport{}).NewClientConn(c)
				if err != nil {
					t.Error(err)
					c.Close()
					return &http.Transport{}
				}
				t.Cleanup(func() { cc.Close() })
				return idleCountingRT{cc, &closeIdle}
			},
		}
	})
	if resp, _, err := sockOptGet(t, tr, srv.URL, nil, TOS(0x10)); err != nil || resp.Proto != "HTTP/2.0" {
		t.Fatalf("%v, %v; want HTTP/2.0", resp, err)
	}
	if _, known := sharedGuard(t, tr, srv.URL).Get(sockopt.NoDelay); !known {
		t.Fatal("the TLSNextProto connection lost the dialer's guard (it does not know TCP_NODELAY)")
	}
	tr.CloseIdleConnections()
	if n := closeIdle.Load(); n != 1 {
		t.Fatalf("the RoundTripper's CloseIdleConnections called %d times, want 1", n)
	}
	if resp, _, err := sockOptGet(t, tr, srv.URL, nil, TOS(0x10)); err != nil || resp.Proto != "HTTP/2.0" {
		t.Fatalf("after CloseIdleConnections: %v, %v; want HTTP/2.0", resp, err)
	}
	if n := made.Load(); n != 2 {
		t.Fatalf("TLSNextProto called %d times, want 2 (a new connection after CloseIdleConnections)", n)
	}
}

// TestTCPUserTimeoutMilliseconds: TCPUserTimeout rounds a fraction of a
// millisecond up, away from zero, as Go rounds keep-alive periods: a small
// positive timeout is not turned into zero (the system default, no timeout
// of ours at all) and a negative one stays negative, so the request fails
// as WithSocketOptions promises instead of clearing the option.
func TestTCPUserTimeoutMilliseconds(t *testing.T) {
	tests := []struct {
		d       time.Duration
		wantMs  int
		invalid bool
	}{
		{0, 0, false},
		{time.Nanosecond, 1, false},
		{500 * time.Microsecond, 1, false},
		{time.Millisecond, 1, false},
		{1500 * time.Microsecond, 2, false},
		{5 * time.Second, 5000, false},
		{-time.Nanosecond, -1, true},
		{-999 * time.Microsecond, -1, true},
		{-time.Millisecond, -1, true},
		{-1500 * time.Microsecond, -2, true},
	}
	for _, tt := range tests {
		o := TCPUserTimeout(tt.d)
		if o.opt != sockopt.UserTimeout || o.value != tt.wantMs {
			t.Errorf("TCPUserTimeout(%v) = %v %d, want %v %d", tt.d, o.opt, o.value, sockopt.UserTimeout, tt.wantMs)
		}
		err := validateSocketOptions([]SocketOption{o})
		if invalid := errors.Is(err, sockopt.ErrInvalidValue); invalid != tt.invalid {
			t.Errorf("TCPUserTimeout(%v): validation error %v, want invalid %v", tt.d, err, tt.invalid)
		}
	}
}
