package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// Behaviours that changed in Go 1.27's net/http (toolchain_go127.go): each
// test runs net/http and ferry side by side and checks both against what
// the toolchain the test was built with does.

// statedTLS is a caller's TLS connection that is not a *tls.Conn (a
// wrapper, as TLS libraries and instrumentation return): it forwards the
// handshake and the state to the *tls.Conn inside.
type statedTLS struct {
	net.Conn
	tc *tls.Conn
}

func (s statedTLS) HandshakeContext(ctx context.Context) error { return s.tc.HandshakeContext(ctx) }
func (s statedTLS) ConnectionState() tls.ConnectionState       { return s.tc.ConnectionState() }

// TestToolchainDialTLSStater: from Go 1.27 a DialTLSContext connection with
// a ConnectionState method is TLS (handshake hooks, Response.TLS, ALPN
// choosing HTTP/2); before, it is an opaque connection spoken to in
// HTTP/1.1 with no TLS state and no hooks.
func TestToolchainDialTLSStater(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	trusted := srv.Client().Transport.(*http.Transport).TLSClientConfig
	for _, alpn := range []string{"http/1.1", "h2"} {
		if alpn == "h2" && !netHTTP127 {
			// The wrapper would negotiate h2 and then be spoken to in
			// HTTP/1.1 by both transports: nothing to compare.
			continue
		}
		for _, impl := range []string{"nethttp", "ferry"} {
			t.Run(alpn+"/"+impl, func(t *testing.T) {
				cfg := trusted.Clone()
				cfg.ServerName = "example.com"
				cfg.NextProtos = []string{alpn}
				var dials atomic.Int32
				dialTLS := func(ctx context.Context, network, addr string) (net.Conn, error) {
					dials.Add(1)
					raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					tc := tls.Client(raw, cfg) // not handshaken: the transport does it
					return statedTLS{Conn: tc, tc: tc}, nil
				}
				var rt http.RoundTripper = &http.Transport{DialTLSContext: dialTLS, ForceAttemptHTTP2: true}
				if impl == "ferry" {
					rt = &Transport{DialTLSContext: dialTLS, ForceAttemptHTTP2: true}
				}
				defer closeIdle(rt)
				var hooks tlsHooks
				trace := hooks.trace()
				for i := range 2 {
					req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", srv.URL, nil)
					resp, err := rt.RoundTrip(req)
					if err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						t.Fatalf("request %d body: %v", i, err)
					}
					wantProto := "HTTP/1.1"
					if alpn == "h2" {
						wantProto = "HTTP/2.0"
					}
					if resp.Proto != wantProto || string(body) != wantProto {
						t.Fatalf("request %d: Proto %q, server saw %q; want %q", i, resp.Proto, body, wantProto)
					}
					if gotTLS := resp.TLS != nil; gotTLS != netHTTP127 {
						t.Fatalf("request %d: Response.TLS set = %v, want %v (netHTTP127)", i, gotTLS, netHTTP127)
					}
					if resp.TLS != nil && alpn == "h2" && resp.TLS.NegotiatedProtocol != alpn {
						t.Fatalf("request %d: negotiated %q, want %q", i, resp.TLS.NegotiatedProtocol, alpn)
					}
				}
				if n := dials.Load(); n != 1 {
					t.Fatalf("%d dials for two sequential requests, want 1 (reuse)", n)
				}
				events, doneErr, incomplete := hooks.result()
				if doneErr != nil || incomplete {
					t.Errorf("TLSHandshakeDone reported %v, incomplete handshake %v", doneErr, incomplete)
				}
				want := []string(nil)
				if netHTTP127 {
					want = []string{"start", "done"}
				}
				if !slices.Equal(events, want) {
					t.Fatalf("TLS hooks %q, want %q", events, want)
				}
			})
		}
	}
}

// TestToolchainConnectNotReused: after a CONNECT that the server refuses
// (403 with a body read to the end, the connection kept open by a
// scripted server), Go 1.27 closes the connection; Go 1.26 reuses it for
// the next request.
func TestToolchainConnectNotReused(t *testing.T) {
	srv := startRawServer(t, func(c *rawConn) {
		for {
			head, err := c.readRequest()
			if err != nil {
				return
			}
			reply := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
			if strings.HasPrefix(head, "CONNECT ") {
				reply = "HTTP/1.1 403 Forbidden\r\nContent-Length: 15\r\n\r\nno tunnels here"
			}
			if _, err := io.WriteString(c, reply); err != nil {
				return
			}
		}
	})
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			srv.mu.Lock()
			srv.conns = 0
			srv.mu.Unlock()
			var rt http.RoundTripper = &http.Transport{}
			if impl == "ferry" {
				rt = &Transport{}
			}
			defer closeIdle(rt)
			req, _ := http.NewRequest("CONNECT", srv.URL, nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusForbidden || string(body) != "no tunnels here" {
				t.Fatalf("CONNECT: status %d, body %q, err %v", resp.StatusCode, body, err)
			}
			o := observe(rt, newReq(t, "GET", srv.URL, nil))
			if o.Status != 200 || o.Body != "ok" {
				t.Fatalf("GET after CONNECT: %+v", o)
			}
			want := 1
			if netHTTP127 {
				want = 2
			}
			n := srv.connCount()
			if n != want {
				t.Fatalf("server saw %d connections, want %d (netHTTP127=%v)", n, want, netHTTP127)
			}
		})
	}
}
