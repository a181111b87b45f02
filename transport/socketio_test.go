package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"

	"github.com/ferryhttp/ferry/internal/sockio"
)

// netConnUnder is what GotConn reported for one GET on rt: the connection,
// and (for TLS) the connection under its TLS.
func netConnUnder(t *testing.T, rt http.RoundTripper, url string, wantProto int) (conn, under net.Conn) {
	t.Helper()
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { conn = info.Conn }}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", url, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "socket" || resp.ProtoMajor != wantProto {
		t.Fatalf("got %s %q (err %v), want HTTP/%d \"socket\"", resp.Proto, body, err, wantProto)
	}
	if tc, ok := conn.(*tls.Conn); ok {
		under = tc.NetConn()
	}
	return conn, under
}

// TestOwnSocketsUseRawSocketIO pins where ferry reads and writes with raw
// system calls (internal/sockio): on every socket it dialled itself. Under
// TLS, over HTTP/1.1 and HTTP/2, the *net.TCPConn is reachable through the
// *tls.Conn's NetConn; in cleartext (HTTP/1.1 and h2c) GotConn still
// reports the *net.TCPConn as dialled. A caller's DialContext connection
// is used as it came.
func TestOwnSocketsUseRawSocketIO(t *testing.T) {
	if !sockio.Enabled() {
		t.Skip("raw socket I/O is off on this platform or by FERRY_RAWIO=off")
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "socket") })
	h2 := httptest.NewUnstartedServer(handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	h1 := httptest.NewTLSServer(handler)
	defer h1.Close()
	clear := httptest.NewUnstartedServer(handler)
	clear.Config.Protocols = protocolsOf("h1", "h2c")
	clear.Start()
	defer clear.Close()
	cfg := h2.Client().Transport.(*http.Transport).TLSClientConfig

	for _, tc := range []struct {
		name  string
		url   string
		proto int
	}{
		{"h2", h2.URL, 2},
		{"h1 over TLS", h1.URL, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
			defer rt.CloseIdleConnections()
			_, under := netConnUnder(t, rt, tc.url, tc.proto)
			sc, ok := under.(*sockio.Conn)
			if !ok {
				t.Fatalf("TLS runs over %T, want *sockio.Conn", under)
			}
			if _, ok := sc.NetConn().(*net.TCPConn); !ok {
				t.Fatalf("sockio.Conn.NetConn() = %T, want *net.TCPConn", sc.NetConn())
			}
		})
	}
	t.Run("caller's DialContext", func(t *testing.T) {
		rt := &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, DialContext: (&net.Dialer{}).DialContext}
		defer rt.CloseIdleConnections()
		if _, under := netConnUnder(t, rt, h2.URL, 2); !isTCPConn(under) {
			t.Fatalf("TLS over a caller's connection runs over %T, want its *net.TCPConn", under)
		}
	})
	// Through a CONNECT proxy the origin's TLS runs over the socket to the
	// proxy: wrapped when ferry dialled it, as it came from a caller's
	// DialContext.
	proxy := startTestProxy(t, nil, "")
	t.Run("tunnel, ferry's dial", func(t *testing.T) {
		rt := &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, Proxy: http.ProxyURL(proxy.url("", ""))}
		defer rt.CloseIdleConnections()
		if _, under := netConnUnder(t, rt, h2.URL, 2); !isSockio(under) {
			t.Fatalf("TLS through a tunnel ferry dialled runs over %T, want *sockio.Conn", under)
		}
	})
	t.Run("tunnel, caller's DialContext", func(t *testing.T) {
		rt := &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, Proxy: http.ProxyURL(proxy.url("", "")),
			DialContext: (&net.Dialer{}).DialContext}
		defer rt.CloseIdleConnections()
		if _, under := netConnUnder(t, rt, h2.URL, 2); !isTCPConn(under) {
			t.Fatalf("TLS through a tunnel on a caller's connection runs over %T, want its *net.TCPConn", under)
		}
	})
	t.Run("cleartext h1", func(t *testing.T) {
		rt := &Transport{}
		defer rt.CloseIdleConnections()
		if conn, _ := netConnUnder(t, rt, clear.URL, 1); !isTCPConn(conn) {
			t.Fatalf("GotConn reported %T for cleartext, want the *net.TCPConn", conn)
		}
		if io := idleIOConn(t, rt, clear.URL); !isSockio(io) {
			t.Fatalf("cleartext HTTP/1.1 reads and writes %T, want *sockio.Conn", io)
		}
	})
	t.Run("h2c", func(t *testing.T) {
		rt := &Transport{Protocols: protocolsOf("h2c")}
		defer rt.CloseIdleConnections()
		if conn, _ := netConnUnder(t, rt, clear.URL, 2); !isTCPConn(conn) {
			t.Fatalf("GotConn reported %T for h2c, want the *net.TCPConn", conn)
		}
		sc, ok := rt.pool.GetShared(connKeyOf(t, rt, clear.URL))
		if !ok {
			t.Fatal("no HTTP/2 connection after the GET")
		}
		c := sc.(*h2Shared)
		defer c.ReleaseStream()
		if io := c.IOConn(); !isSockio(io) {
			t.Fatalf("h2c reads and writes %T, want *sockio.Conn", io)
		}
		if nc := c.NetConn(); !isTCPConn(nc) {
			t.Fatalf("h2c connection's NetConn is %T, want the *net.TCPConn", nc)
		}
	})
	t.Run("cleartext, caller's DialContext", func(t *testing.T) {
		rt := &Transport{DialContext: (&net.Dialer{}).DialContext}
		defer rt.CloseIdleConnections()
		netConnUnder(t, rt, clear.URL, 1)
		if io := idleIOConn(t, rt, clear.URL); !isTCPConn(io) {
			t.Fatalf("a caller's cleartext connection is read and written as %T, want its *net.TCPConn", io)
		}
	})
	t.Run("FERRY_RAWIO=off", func(t *testing.T) {
		was := sockio.SetEnabled(false)
		defer sockio.SetEnabled(was)
		rt := &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		defer rt.CloseIdleConnections()
		if _, under := netConnUnder(t, rt, h2.URL, 2); !isTCPConn(under) {
			t.Fatalf("with raw socket I/O off, TLS runs over %T, want *net.TCPConn", under)
		}
		ct := &Transport{}
		defer ct.CloseIdleConnections()
		netConnUnder(t, ct, clear.URL, 1)
		if io := idleIOConn(t, ct, clear.URL); !isTCPConn(io) {
			t.Fatalf("with raw socket I/O off, cleartext is read and written as %T, want *net.TCPConn", io)
		}
	})
}

// idleIOConn takes the idle HTTP/1.1 connection rt keeps for url out of
// its pool, closes it when the test ends, and returns the connection it
// reads and writes.
func idleIOConn(t *testing.T, rt *Transport, url string) net.Conn {
	t.Helper()
	pc, _, ok := rt.pool.TryGet(connKeyOf(t, rt, url))
	if !ok {
		t.Fatal("no idle connection after the GET")
	}
	t.Cleanup(func() { pc.Close() })
	return pc.IOConn()
}

func isSockio(c net.Conn) bool {
	_, ok := c.(*sockio.Conn)
	return ok
}

func isTCPConn(c net.Conn) bool {
	_, ok := c.(*net.TCPConn)
	return ok
}
