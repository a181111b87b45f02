package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/ferryhttp/ferry/internal/idlepool"
	"github.com/ferryhttp/ferry/internal/sockopt"
)

// Socket options over every protocol: checked before a connection is
// taken, applied over HTTP/2 to the TCP socket under the shared connection
// through its guard, checked but not applied over HTTP/3.

// sockReadback reads an integer socket option straight from the kernel,
// through the SyscallConn of the TCP socket under c (under its TLS).
func sockReadback(t *testing.T, c net.Conn, level, name int) int {
	t.Helper()
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T is not a socket", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, name) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// connSeen is what a request's trace saw of connections.
type connSeen struct {
	asked bool     // GetConn fired: the request looked for a connection
	conn  net.Conn // GotConn's connection
}

// sockOptGet sends a GET (a POST with body) to u carrying opts and returns
// the response (body read and closed), what its trace saw, and the error.
func sockOptGet(t *testing.T, rt http.RoundTripper, u string, body io.ReadCloser, opts ...SocketOption) (*http.Response, *connSeen, error) {
	t.Helper()
	got := &connSeen{}
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GetConn: func(string) { got.asked = true },
		GotConn: func(i httptrace.GotConnInfo) { got.conn = i.Conn },
	})
	if opts != nil {
		ctx = WithSocketOptions(ctx, opts...)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // hang guard
	defer cancel()
	method := "GET"
	if body != nil {
		method = "POST"
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, got, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, got, nil
}

// closeTracker is a request body that records its Close.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

// TestSocketOptionsInvalidEveryProtocol: an invalid value fails the request
// with the guard's own error (what HTTP/1.1 returned before the check moved
// up front) over HTTP/1.1, HTTP/2 and HTTP/3, before any connection is
// taken: no GotConn, no connection dialled, the body closed; the
// connection already there keeps serving.
func TestSocketOptionsInvalidEveryProtocol(t *testing.T) {
	cert := h3Cert(t)
	wantErr := sockopt.Validate(sockopt.TOS, 300)
	if wantErr == nil {
		t.Fatal("TOS 300 validates")
	}
	tests := []struct {
		proto string
		start func(t *testing.T) (u string, tr *Transport, conns func() int)
		warm  bool // a request without options sets the protocol up first
	}{
		{"HTTP/1.1", func(t *testing.T) (string, *Transport, func() int) {
			s := startH2Server(t, h2ServerKind{}, static(hello), cert)
			return s.URL, newH3Transport(t, nil), s.connCount
		}, false},
		{"HTTP/2.0", func(t *testing.T) (string, *Transport, func() int) {
			s := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), cert)
			return s.URL, newH3Transport(t, func(tr *Transport) { tr.ForceAttemptHTTP2 = true }), s.connCount
		}, true},
		{"HTTP/3.0", func(t *testing.T) (string, *Transport, func() int) {
			u := startWrapped(t, &protoHandler{})
			tr := newH3Transport(t, nil)
			fetch(t, tr, "GET", u, nil) // learns Alt-Svc over TCP
			eventually(t, "the QUIC handshake", func() bool { return h3Ready(t, tr, u) })
			return u, tr, nil
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.proto, func(t *testing.T) {
			u, tr, conns := tt.start(t)
			if tt.warm {
				resp, _, err := sockOptGet(t, tr, u, nil)
				if err != nil || resp.Proto != tt.proto {
					t.Fatalf("warm-up: %v, %v; want %s", resp, err, tt.proto)
				}
			}
			accepted := 0
			if conns != nil {
				accepted = conns()
			}
			body := &closeTracker{Reader: strings.NewReader("x")}
			resp, got, err := sockOptGet(t, tr, u, body, TOS(300))
			if err == nil {
				t.Fatalf("TOS(300) served over %s", resp.Proto)
			}
			if !errors.Is(err, sockopt.ErrInvalidValue) || err.Error() != wantErr.Error() {
				t.Fatalf("err %q, want %q", err, wantErr)
			}
			if got.asked || got.conn != nil {
				t.Fatal("a connection was looked for or taken for a request with an invalid option")
			}
			if conns != nil && conns() != accepted {
				t.Fatalf("%d connections accepted, want %d: one was dialled for an invalid option", conns(), accepted)
			}
			if !body.closed.Load() {
				t.Fatal("request body not closed")
			}
			// A valid value is served on the same protocol (over HTTP/3
			// it is checked, not applied).
			resp, _, err = sockOptGet(t, tr, u, nil, TOS(0x10))
			if err != nil || resp.Proto != tt.proto {
				t.Fatalf("TOS(0x10): %v, %v; want %s", resp, err, tt.proto)
			}
		})
	}
}

// TestSocketOptionsAppliedOverHTTP2: over a shared HTTP/2 connection the
// options reach the TCP socket under its TLS (read back with getsockopt),
// through the connection's guard: the dialer's when ferry dialled, one made
// on first use for a caller's DialContext. Repeating the values makes no
// setsockopt; a changed value makes one and, the socket being the
// connection's, stays in effect for the requests after it.
func TestSocketOptionsAppliedOverHTTP2(t *testing.T) {
	srv := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), h3Cert(t))
	for _, dialSelf := range []bool{true, false} {
		name := "ferry-dialer"
		if !dialSelf {
			name = "user-dialcontext"
		}
		t.Run(name, func(t *testing.T) {
			tr := newH3Transport(t, func(tr *Transport) { tr.ForceAttemptHTTP2 = true })
			if !dialSelf {
				tr.DialContext = (&netDialer{}).DialContext
			}
			var conn net.Conn
			do := func(opts ...SocketOption) {
				t.Helper()
				resp, got, err := sockOptGet(t, tr, srv.URL, nil, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Proto != "HTTP/2.0" {
					t.Fatalf("proto %s, want HTTP/2.0", resp.Proto)
				}
				if conn == nil {
					conn = got.conn
				} else if got.conn != conn {
					t.Fatal("the requests did not share one connection")
				}
			}
			do(TOS(0x10), TCPUserTimeout(5*time.Second))
			if v := sockReadback(t, conn, unix.IPPROTO_IP, unix.IP_TOS); v != 0x10 {
				t.Fatalf("IP_TOS %#x, want 0x10", v)
			}
			if v := sockReadback(t, conn, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); v != 5000 {
				t.Fatalf("TCP_USER_TIMEOUT %d, want 5000", v)
			}
			g := sharedGuard(t, tr, srv.URL)
			if _, known := g.Get(sockopt.NoDelay); known != dialSelf {
				// The dialer's guard knows Go set TCP_NODELAY; one made
				// later for a caller's connection does not.
				t.Fatalf("guard knows TCP_NODELAY: %v; want %v (the dialer's guard: %v)", known, dialSelf, dialSelf)
			}
			base := g.Syscalls()
			for i := 0; i < 10; i++ {
				do(TOS(0x10), TCPUserTimeout(5*time.Second))
				if n := g.Syscalls(); n != base {
					t.Fatalf("request %d with the values in effect: %d setsockopt calls, want %d", i, n, base)
				}
			}
			do(TOS(0x20))
			if n := g.Syscalls(); n != base+1 {
				t.Fatalf("changed TOS: %d setsockopt calls, want %d", n, base+1)
			}
			do() // no options: the connection keeps the last ones
			if v := sockReadback(t, conn, unix.IPPROTO_IP, unix.IP_TOS); v != 0x20 {
				t.Fatalf("IP_TOS %#x, want 0x20", v)
			}
		})
	}
}

// sharedGuard is the guard of the shared connection pooled for u.
func sharedGuard(t *testing.T, tr *Transport, u string) *sockopt.Guard {
	t.Helper()
	key, err := tr.connKeyFor(newReq(t, "GET", u, nil))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := tr.pool.GetShared(key)
	if !ok {
		t.Fatal("no shared connection pooled")
	}
	sc := s.(sharedConn)
	sc.ReleaseStream()
	c, ok := sc.(socketCarrier)
	if !ok {
		t.Fatalf("%T does not carry its socket", sc)
	}
	g, err := c.socket().guardNow()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// opaqueConn hides the socket under a connection: it has net.Conn's
// methods only (no SyscallConn), as a caller's tunnel or wrapper would.
type opaqueConn struct{ net.Conn }

// TestSocketOptionsUnsupportedSharedConn: a caller's DialTLSContext whose
// connection has no socket under it fails a request with socket options
// (sockopt.ErrUnsupported) over HTTP/2 as over HTTP/1.1. The shared HTTP/2
// connection gets its stream back and is left to serve requests without
// options.
func TestSocketOptionsUnsupportedSharedConn(t *testing.T) {
	cert := h3Cert(t)
	for _, h2 := range []bool{false, true} {
		proto := "HTTP/1.1"
		if h2 {
			proto = "HTTP/2.0"
		}
		t.Run(proto, func(t *testing.T) {
			srv := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), cert)
			tr := newH3Transport(t, func(tr *Transport) { tr.ForceAttemptHTTP2 = true })
			if !h2 {
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			}
			tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				cfg := cert.ClientConfig()
				cfg.ServerName = "127.0.0.1"
				cfg.NextProtos = []string{"http/1.1"}
				if h2 {
					cfg.NextProtos = []string{"h2", "http/1.1"}
				}
				tc := tls.Client(opaqueConn{c}, cfg)
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				return tc, nil
			}
			resp, first, err := sockOptGet(t, tr, srv.URL, nil)
			if err != nil || resp.Proto != proto {
				t.Fatalf("without options: %v, %v; want %s", resp, err, proto)
			}
			_, _, err = sockOptGet(t, tr, srv.URL, nil, TOS(0x10))
			if !errors.Is(err, sockopt.ErrUnsupported) {
				t.Fatalf("err %v, want sockopt.ErrUnsupported", err)
			}
			// An invalid value is the error, not the connection's lack of
			// a socket: it is checked first.
			_, _, err = sockOptGet(t, tr, srv.URL, nil, TOS(300))
			if !errors.Is(err, sockopt.ErrInvalidValue) {
				t.Fatalf("TOS(300): err %v, want sockopt.ErrInvalidValue", err)
			}
			resp, again, err := sockOptGet(t, tr, srv.URL, nil)
			if err != nil || resp.Proto != proto {
				t.Fatalf("after the failure: %v, %v; want %s", resp, err, proto)
			}
			if h2 && again.conn != first.conn {
				t.Fatal("the shared connection was dropped for one request's options")
			}
			if h2 {
				// Every stream is given back, the failed request's too.
				eventually(t, "the shared connection to go idle", func() bool {
					for _, e := range tr.h2.live.snapshot() {
						if _, idle := e.c.(idlepool.IdleReporter).IdleSince(); !idle {
							return false
						}
					}
					return true
				})
			}
		})
	}
}

// TestSocketOptionsTLSNextProto: a caller's TLSNextProto RoundTripper for
// "h2" is a shared connection too; the options reach the socket under the
// *tls.Conn it was given.
func TestSocketOptionsTLSNextProto(t *testing.T) {
	srv := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), h3Cert(t))
	var given atomic.Pointer[tls.Conn]
	tr := newH3Transport(t, func(tr *Transport) {
		tr.TLSClientConfig.NextProtos = []string{"h2", "http/1.1"}
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{
			"h2": func(_ string, c *tls.Conn) http.RoundTripper {
				given.Store(c)
				cc, err := (&http2.Transport{}).NewClientConn(c)
				if err != nil {
					t.Error(err)
					c.Close()
					return &http.Transport{}
				}
				return cc
			},
		}
	})
	for _, tos := range []int{0x10, 0x10, 0x28} {
		resp, _, err := sockOptGet(t, tr, srv.URL, nil, TOS(tos))
		if err != nil || resp.Proto != "HTTP/2.0" {
			t.Fatalf("TOS(%#x): %v, %v; want HTTP/2.0", tos, resp, err)
		}
		c := given.Load()
		if c == nil {
			t.Fatal("TLSNextProto was not used")
		}
		if v := sockReadback(t, c, unix.IPPROTO_IP, unix.IP_TOS); v != tos {
			t.Fatalf("IP_TOS %#x, want %#x", v, tos)
		}
	}
}

// TestSocketOptionsConcurrentH2: concurrent requests with different values
// on one shared connection (a caller's DialContext, so the guard is made by
// whichever request comes first) all succeed; the last value applied is in
// effect and the guard's record matches the kernel.
func TestSocketOptionsConcurrentH2(t *testing.T) {
	srv := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), h3Cert(t))
	tr := newH3Transport(t, func(tr *Transport) {
		tr.ForceAttemptHTTP2 = true
		tr.DialContext = (&netDialer{}).DialContext
	})
	if resp, _, err := sockOptGet(t, tr, srv.URL, nil); err != nil || resp.Proto != "HTTP/2.0" {
		t.Fatalf("warm-up: %v, %v; want HTTP/2.0", resp, err)
	}
	const workers, each = 8, 10
	errs := make(chan error, workers*each)
	conns := make(chan net.Conn, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, got, err := sockOptGet(t, tr, srv.URL, nil, TOS(0x10<<(w%2)))
				errs <- err
				conns <- got.conn
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(conns)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var conn net.Conn
	for c := range conns {
		if conn == nil {
			conn = c
		} else if c != conn {
			t.Fatal("the requests did not share one connection")
		}
	}
	v := sockReadback(t, conn, unix.IPPROTO_IP, unix.IP_TOS)
	rec, known := sharedGuard(t, tr, srv.URL).Get(sockopt.TOS)
	if !known || rec != v || (v != 0x10 && v != 0x20) {
		t.Fatalf("kernel IP_TOS %#x, guard's record %#x (known %v); want one of 0x10, 0x20 in both", v, rec, known)
	}
}
