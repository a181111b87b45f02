package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The retry's new route (Transport.reroute): a
// retried attempt asks the Proxy func again, as net/http does, and takes
// the route it gives. Every scenario makes the second request fail on its
// kept-alive connection (closed unanswered), so it is retried.

const rerouteOK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// answerOnceThenDrop answers the first request on a connection and closes
// the connection when the next one arrives.
func answerOnceThenDrop(c *rawConn) {
	if _, err := c.readRequest(); err != nil {
		return
	}
	io.WriteString(c, rerouteOK)
	c.readRequest()
}

// countedBody is a request body that counts its Close calls.
type countedBody struct {
	io.Reader
	closes *atomic.Int32
}

func (b countedBody) Close() error { b.closes.Add(1); return nil }

// bodyLedger records what happened to a request's bodies: GetBody calls
// and the Close calls of each body produced (index 0: the first).
type bodyLedger struct {
	mu      sync.Mutex
	closes  []*atomic.Int32
	getBody int
}

func (l *bodyLedger) body() io.ReadCloser {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := new(atomic.Int32)
	l.closes = append(l.closes, n)
	return countedBody{Reader: strings.NewReader("hello"), closes: n}
}

func (l *bodyLedger) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("GetBody calls %d; closes per body:", l.getBody)
	for _, c := range l.closes {
		s += fmt.Sprintf(" %d", c.Load())
	}
	return s
}

// errProxyDown is what the Proxy func returns on the retry.
var errProxyDown = errors.New("test: no proxy available")

// TestRerouteProxyError: the Proxy func fails when asked for the
// retry. net/http rewinds the body (GetBody) before it asks, returns the
// Proxy func's error as is and closes the rewound body; the first body is
// closed once.
func TestRerouteProxyError(t *testing.T) {
	var got [2]string
	for i, impl := range []string{"nethttp", "ferry"} {
		e := &proxyEnv{t: t, cert: proxyTestCert(t)}
		first := e.rawProxy(answerOnceThenDrop)
		var calls atomic.Int32
		s := proxySettings{
			DialContext: dialLoopbackNames,
			Proxy: func(*http.Request) (*url.URL, error) {
				if calls.Add(1) <= 2 {
					return first, nil
				}
				return nil, errProxyDown
			},
		}
		rt := s.transport(impl, tlsTestConfig(e.cert))
		target := e.target("http", "origin.test", "/r")
		getOK(t, rt, context.Background(), target)
		var l bodyLedger
		req, err := http.NewRequest("PUT", target, l.body())
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = 5
		req.Header.Set("Idempotency-Key", "k1")
		req.GetBody = func() (io.ReadCloser, error) {
			l.mu.Lock()
			l.getBody++
			l.mu.Unlock()
			return l.body(), nil
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: want the Proxy func's error", impl)
		}
		closeIdle(rt)
		if err != errProxyDown {
			t.Errorf("%s: error %T %v, want the Proxy func's error itself", impl, err, err)
		}
		got[i] = l.summary()
	}
	if got[0] != got[1] {
		t.Errorf("bodies differ\nnet/http: %s\nferry:    %s", got[0], got[1])
	}
}

// TestRerouteInvalidHost: a request whose Host is not a valid
// header value goes direct (sent with an empty Host); its retry is routed
// to a forwarding proxy, which net/http refuses ("http: invalid Host
// header"). Only the outcome is compared: net/http dials the proxy first.
func TestRerouteInvalidHost(t *testing.T) {
	var got [2]string
	for i, impl := range []string{"nethttp", "ferry"} {
		e := &proxyEnv{t: t, cert: proxyTestCert(t)}
		origin := startRawServer(t, answerOnceThenDrop)
		proxy := e.plainProxy().url("", "")
		var calls atomic.Int32
		s := proxySettings{Proxy: func(*http.Request) (*url.URL, error) {
			if calls.Add(1) <= 2 {
				return nil, nil
			}
			return proxy, nil
		}}
		rt := s.transport(impl, tlsTestConfig(e.cert))
		var out []string
		for j := 0; j < 2; j++ {
			req, _ := http.NewRequest("GET", origin.URL+"/h", nil)
			req.Host = "bad host"
			resp, err := rt.RoundTrip(req)
			if err != nil {
				out = append(out, "error: "+err.Error())
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out = append(out, resp.Status+" "+string(body))
		}
		closeIdle(rt)
		got[i] = strings.Join(out, " | ")
	}
	if got[0] != got[1] {
		t.Errorf("outcome differs\nnet/http: %s\nferry:    %s", got[0], got[1])
	}
}

// TestRerouteResolvesNewRoute: the retry is routed to a proxy on
// another address (::1, where the first proxy, 127.0.0.1, is not) and
// reaches it. It does not show that the first route's resolved addresses
// are dropped: a request resolves only when an attempt dials, and a
// dialled attempt is not retried, so a retry finds none to reuse (keeping
// them on a new route survives this test).
func TestRerouteResolvesNewRoute(t *testing.T) {
	ln6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	ln6.Close()
	for _, impl := range []string{"nethttp", "ferry"} {
		e := &proxyEnv{t: t, cert: proxyTestCert(t)}
		first := e.rawProxy(answerOnceThenDrop)
		first.User = nil
		second := startRawServer6(t, func(c *rawConn) {
			for {
				if _, err := c.readRequest(); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
			}
		})
		var calls atomic.Int32
		s := proxySettings{Proxy: func(*http.Request) (*url.URL, error) {
			if calls.Add(1) <= 2 {
				return first, nil
			}
			return second, nil
		}}
		rt := s.transport(impl, tlsTestConfig(e.cert))
		target := e.target("http", "origin.test", "/r")
		getOK(t, rt, context.Background(), target)
		if got := getOK(t, rt, context.Background(), target); got != "second" {
			t.Fatalf("%s: the retry got %q, want the second proxy's answer", impl, got)
		}
		closeIdle(rt)
	}
}

// startRawServer6 is startRawServer on [::1]; it returns the server's URL
// as a proxy URL.
func startRawServer6(t *testing.T, script func(c *rawConn)) *url.URL {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	serveRaw(t, ln, script)
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// TestRerouteToSharedConn: the retry's new route reaches the origin
// over HTTP/2. The first route is a CONNECT proxy that tunnels to an
// HTTP/1.1-only copy of the origin (answering once per connection); the
// retry goes direct. Side by side without an earlier direct request (the
// retry dials); then ferry alone with one, so the retry takes the shared
// connection getConn returns for the new key (net/http's HTTP/2 pool is
// keyed by the origin alone and would send every request on that
// connection, proxy or not).
func TestRerouteToSharedConn(t *testing.T) {
	run := func(impl string, warm bool) []string {
		e := &proxyEnv{t: t, cert: proxyTestCert(t)}
		target := e.h2Target("origin.test", "/s")
		h1cfg := e.cert.ServerConfig().Clone()
		h1cfg.NextProtos = []string{"http/1.1"}
		tunnel := e.rawProxy(func(c *rawConn) {
			if _, err := c.readRequest(); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
			tc := tls.Server(&prefixedConn{Conn: c.Conn, r: c.br}, h1cfg)
			inner := &rawConn{Conn: tc, br: bufio.NewReader(tc), s: c.s}
			answerOnceThenDrop(inner)
			tc.Close()
		})
		tunnel.User = nil
		var calls atomic.Int32
		s := proxySettings{
			DialContext:       dialLoopbackNames,
			ForceAttemptHTTP2: true,
			Proxy: func(r *http.Request) (*url.URL, error) {
				if r.Header.Get("X-Direct") != "" {
					return nil, nil
				}
				if calls.Add(1) <= 2 {
					return tunnel, nil
				}
				return nil, nil
			},
		}
		rt := s.transport(impl, tlsTestConfig(e.cert))
		defer closeIdle(rt)
		var out []string
		do := func(direct bool) {
			req, _ := http.NewRequest("GET", target, nil)
			if direct {
				req.Header.Set("X-Direct", "1")
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				out = append(out, "error: "+err.Error())
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out = append(out, resp.Proto+" "+e.relabel(string(body)))
		}
		if warm {
			do(true) // the shared direct connection
		}
		do(false) // through the tunnel: HTTP/1.1
		do(false) // fails on the tunnel, retried direct: HTTP/2
		do(true)
		return out
	}
	want, got := run("nethttp", false), run("ferry", false)
	if !reflect.DeepEqual(want, got) {
		t.Errorf("outcome differs\nnet/http: %q\nferry:    %q", want, got)
	}
	got = run("ferry", true)
	if len(got) != 4 || got[1] != "HTTP/1.1 ok" || !strings.HasPrefix(got[2], "HTTP/2.0 origin") || got[2] != got[0] {
		t.Errorf("ferry: %q, want the retry answered on the shared HTTP/2 connection", got)
	}
}

// prefixedConn reads through r (bytes a bufio.Reader already holds).
type prefixedConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
