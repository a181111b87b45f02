package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// h1conn.Conn.FitForReuse (internal/h1conn, alive.go, alive_unix.go): an idle HTTP/1.1
// connection that received something while it sat in the pool (bytes
// nobody asked for, or the server's FIN) is not used for the next request.
// Each scenario waits until the server has done its part and then lets the
// connection sit idle past quietCheckIdle (a sleep that only guarantees the
// precondition; nothing is timed), and checks what the client got and what
// the server received on the old connection.

// holdListener wraps each accepted connection in a coalescingConn, under
// TLS when cfg is set.
type holdListener struct {
	net.Listener
	cfg *tls.Config
}

func (l holdListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	hc := &coalescingConn{Conn: c}
	if l.cfg != nil {
		return tls.Server(hc, l.cfg), nil
	}
	return hc, nil
}

// wrappedConn is a client connection as a custom DialContext might
// return it (counting bytes, say): the socket is not reachable from it.
type wrappedConn struct{ net.Conn }

func holdWrites(c *rawConn) *coalescingConn {
	if tc, ok := c.Conn.(*tls.Conn); ok {
		return tc.NetConn().(*coalescingConn)
	}
	return c.Conn.(*coalescingConn)
}

// idleScenario is what the server does on the first connection once the
// first response is due; later requests (and those on other connections)
// get "ok2".
type idleScenario int

const (
	strayAfterIdle   idleScenario = iota // stray response written while the connection is idle
	straySameSegment                     // stray response in the same write(2) as the first response
	halfCloseIdle                        // FIN (shutdown write) while idle; the server still reads
	resetIdle                            // RST while idle: the client's next read fails with ECONNRESET
	healthy                              // nothing: the connection must be reused
)

const idleStray = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL"

// idleServer starts a scripted server for sc. oldReqs counts the requests
// read on the first connection; done is closed once the server has done
// sc's part (after go is closed for the idle scenarios).
type idleServer struct {
	*testServer
	oldReqs  atomic.Int32
	oldEnded chan struct{} // the first connection's script returned
	goSignal chan struct{}
	done     chan struct{}
}

func startIdleServer(t *testing.T, useTLS bool, sc idleScenario, clientAuth ...tls.ClientAuthType) *idleServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var cfg *tls.Config
	if useTLS {
		cfg = h3Cert(t).ServerConfig()
		cfg.NextProtos = []string{"http/1.1"}
		if len(clientAuth) > 0 {
			// Go's TLS 1.3 server then sends its session tickets only
			// after the client's Finished, not in its first flight.
			cfg.ClientAuth = clientAuth[0]
		}
	}
	s := &idleServer{oldEnded: make(chan struct{}), goSignal: make(chan struct{}), done: make(chan struct{})}
	s.testServer = serveRaw(t, holdListener{Listener: ln, cfg: cfg}, func(c *rawConn) {
		if c.n == 0 {
			defer close(s.oldEnded)
			if _, err := c.readRequest(); err != nil {
				return
			}
			s.oldReqs.Add(1)
			hc := holdWrites(c)
			if sc == straySameSegment {
				hc.hold()
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if sc == straySameSegment {
				io.WriteString(c, idleStray)
				if hc.flush() != nil {
					return
				}
				close(s.done)
			} else if sc == healthy {
				close(s.done)
			} else {
				select {
				case <-s.goSignal:
				case <-c.s.close:
					return
				}
				switch sc {
				case strayAfterIdle:
					io.WriteString(c, idleStray)
				case resetIdle:
					tc := hc.Conn.(*net.TCPConn)
					tc.SetLinger(0)
					tc.Close()
					close(s.done)
					return
				default:
					hc.Conn.(*net.TCPConn).CloseWrite()
				}
				close(s.done)
			}
			for {
				if _, err := c.readRequest(); err != nil {
					return
				}
				s.oldReqs.Add(1)
				if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok2"); err != nil {
					return
				}
			}
		}
		for {
			if _, err := c.readRequest(); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok2"); err != nil {
				return
			}
		}
	})
	if useTLS {
		s.URL = strings.Replace(s.URL, "http://", "https://", 1)
	}
	return s
}

// idleDo sends one request and returns its body; got, if not nil,
// records the GotConn events.
func idleDo(t *testing.T, rt http.RoundTripper, method, u string, got *[]httptrace.GotConnInfo) string {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = io.NopCloser(strings.NewReader("payload")) // not replayable
	}
	req := newReq(t, method, u, body)
	if got != nil {
		var mu sync.Mutex
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			mu.Lock()
			*got = append(*got, i)
			mu.Unlock()
		}}))
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s body: %v", method, err)
	}
	return string(b)
}

// idleSettle lets the first connection sit idle long enough to be read
// before reuse: on net/http until its read loop has closed the
// connection (it does as soon as bytes or EOF arrive), on ferry past
// quietCheckIdle.
func idleSettle(t *testing.T, s *idleServer, side string) {
	<-s.done
	if side == "nethttp" {
		select {
		case <-s.oldEnded:
		case <-time.After(10 * time.Second):
			t.Fatal("net/http kept the connection that received bytes or EOF while idle")
		}
		return
	}
	time.Sleep(time.Millisecond) // > quietCheckIdle: the precondition, not a measurement
}

func TestIdleConnReceivedNotReused(t *testing.T) {
	tests := []struct {
		name   string
		tls    bool
		proxy  bool
		wrap   bool // DialContext returns a wrapper without SyscallConn
		auth   bool // the server asks for a client certificate
		sc     idleScenario
		method string
		skip   string // ferry only
	}{
		{name: "https stray after idle GET", tls: true, sc: strayAfterIdle, method: "GET"},
		{name: "https stray after idle POST", tls: true, sc: strayAfterIdle, method: "POST"},
		{name: "https stray in the response's segment GET", tls: true, sc: straySameSegment, method: "GET"},
		{name: "http stray in the response's segment GET", sc: straySameSegment, method: "GET"},
		{name: "http FIN while idle GET", sc: halfCloseIdle, method: "GET"},
		{name: "http FIN while idle POST", sc: halfCloseIdle, method: "POST"},
		{name: "proxy stray after idle GET", proxy: true, sc: strayAfterIdle, method: "GET"},
		{name: "proxy FIN while idle GET", proxy: true, sc: halfCloseIdle, method: "GET"},
		{name: "https healthy GET", tls: true, sc: healthy, method: "GET"},
		{name: "https healthy POST", tls: true, sc: healthy, method: "POST"},
		{name: "http healthy GET", sc: healthy, method: "GET"},
		{name: "https client cert requested healthy GET", tls: true, auth: true, sc: healthy, method: "GET"},
		{name: "wrapped conn healthy GET", wrap: true, sc: healthy, method: "GET"},
		{name: "wrapped conn healthy POST", wrap: true, sc: healthy, method: "POST"},
		// A socket behind a DialContext wrapper cannot be read directly;
		// a goroutine reads it while it is idle (idlewatch.go).
		{name: "wrapped conn stray after idle GET", wrap: true, sc: strayAfterIdle, method: "GET"},
		{name: "wrapped conn stray after idle POST", wrap: true, sc: strayAfterIdle, method: "POST"},
		{name: "wrapped conn FIN while idle POST", wrap: true, sc: halfCloseIdle, method: "POST"},
		{name: "wrapped conn FIN while idle GET", wrap: true, sc: halfCloseIdle, method: "GET"},
		// Only an idle read that ended on the taker's deadline means quiet:
		// one that ended on a reset does not.
		{name: "http RST while idle POST", sc: resetIdle, method: "POST"},
		{name: "wrapped conn RST while idle POST", wrap: true, sc: resetIdle, method: "POST"},
		{name: "wrapped conn RST while idle GET", wrap: true, sc: resetIdle, method: "GET"},
		{name: "wrapped https stray after idle GET", wrap: true, tls: true, sc: strayAfterIdle, method: "GET"},
		{name: "wrapped https FIN while idle POST", wrap: true, tls: true, sc: halfCloseIdle, method: "POST"},
		{name: "wrapped https healthy POST", wrap: true, tls: true, sc: healthy, method: "POST"},
		{name: "wrapped https stray in the response's segment GET", wrap: true, tls: true, sc: straySameSegment, method: "GET"},
	}
	for _, tc := range tests {
		for _, side := range []string{"nethttp", "ferry"} {
			t.Run(tc.name+"/"+side, func(t *testing.T) {
				if side == "ferry" && tc.skip != "" {
					t.Skip(tc.skip)
				}
				if side == "nethttp" && tc.sc == resetIdle {
					// Nothing on the server marks the moment net/http's
					// read loop has seen the reset (oldEnded is at once),
					// so its POST may still go out on the old connection.
					t.Skip("no point at which net/http is known to have seen the reset")
				}
				stressLeakCheck(t, func(t *testing.T) {
					var auth []tls.ClientAuthType
					if tc.auth {
						auth = append(auth, tls.RequestClientCert)
					}
					srv := startIdleServer(t, tc.tls, tc.sc, auth...)
					std := &http.Transport{TLSClientConfig: h3Cert(t).ClientConfig()}
					target := srv.URL
					if tc.proxy {
						// The scripted server is the proxy: it answers
						// the absolute-form requests itself.
						pu, _ := url.Parse(srv.URL)
						std.Proxy = http.ProxyURL(pu)
						target = "http://origin.example/"
					}
					if tc.wrap {
						std.DialContext = hidingDialer(nil)
					}
					var rt http.RoundTripper = std
					if side == "ferry" {
						ft := From(std)
						ft.DisableHTTP3 = true
						rt = ft
					}
					defer closeIdle(rt)
					if got := idleDo(t, rt, "GET", target, nil); got != "ok" {
						t.Fatalf("first response %q", got)
					}
					if tc.sc != straySameSegment {
						close(srv.goSignal)
					}
					if tc.sc == healthy {
						<-srv.done
						time.Sleep(time.Millisecond) // > quietCheckIdle
					} else {
						idleSettle(t, srv, side)
					}
					if tc.wrap {
						awaitIdleWatchReads(t)
					}
					var gots []httptrace.GotConnInfo
					if got := idleDo(t, rt, tc.method, target, &gots); got != "ok2" {
						t.Errorf("second %s got %q, want %q (its own response)", tc.method, got, "ok2")
					}
					wantOld, wantConns := int32(1), 2
					if tc.sc == healthy {
						wantOld, wantConns = 2, 1
					}
					if n := srv.oldReqs.Load(); n != wantOld {
						t.Errorf("the old connection carried %d requests, want %d", n, wantOld)
					}
					if n := srv.connCount(); n != wantConns {
						t.Errorf("%d connections, want %d", n, wantConns)
					}
					// GotConn fires once, for the connection used.
					if len(gots) != 1 || gots[0].Reused != (tc.sc == healthy) {
						t.Errorf("GotConn events %+v, want one with Reused %v", gots, tc.sc == healthy)
					}
				})
			})
		}
	}
}

// A connection handed straight from a finished request to one waiting for
// a MaxConnsPerHost slot (idleFor 0): after the server shut it down for
// writing, a request that cannot be replayed must not be risked on it;
// with a stray response already buffered behind the first one, no request
// may take it. ferry only: net/http hands the connection over before its
// read loop looks at what follows the response, so it races here.
func TestIdleWatchHandoff(t *testing.T) {
	tests := []struct {
		name   string
		sc     idleScenario
		method string
		wrap   bool // DialContext returns a wrapper without SyscallConn
		skip   string
	}{
		{name: "FIN POST", sc: halfCloseIdle, method: "POST"},
		// A wrapped connection is read while idle by a goroutine
		// (idlewatch.go), but one handed over at once is taken before
		// that read begins.
		{name: "wrapped FIN POST", sc: halfCloseIdle, method: "POST", wrap: true,
			skip: "known limit: a wrapped connection handed over at once is taken before its idle read has begun (the read would need to reach the socket before the taker's deadline in the past), so the FIN is not seen and the POST fails with EOF; the same as before idlewatch.go"},
		{name: "wrapped FIN GET", sc: halfCloseIdle, method: "GET", wrap: true,
			skip: "known limit: as wrapped FIN POST; the GET fails on the dead connection and is retried on a new one"},
		{name: "wrapped stray buffered GET", sc: straySameSegment, method: "GET", wrap: true},
		{name: "FIN GET", sc: halfCloseIdle, method: "GET",
			skip: "test: known limit: a connection handed over (idleFor 0) is not read before a replayable request, though the FIN arrived before the handover; the GET goes out on the dead connection, fails and is retried on a new one (the server still receives it if it only shut down writing)"},
		{name: "stray buffered GET", sc: straySameSegment, method: "GET"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			stressLeakCheck(t, func(t *testing.T) {
				srv := startIdleServer(t, false, tc.sc)
				std := &http.Transport{MaxConnsPerHost: 1}
				if tc.wrap {
					std.DialContext = hidingDialer(nil)
				}
				ft := From(std)
				ft.DisableHTTP3 = true
				defer ft.CloseIdleConnections()
				resp, err := ft.RoundTrip(newReq(t, "GET", srv.URL, nil))
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					body string
					err  error
				}
				got := make(chan result, 1)
				go func() {
					var body io.Reader
					if tc.method == "POST" {
						body = io.NopCloser(strings.NewReader("payload"))
					}
					req, _ := http.NewRequestWithContext(context.Background(), tc.method, srv.URL, body)
					r, err := ft.RoundTrip(req)
					if err != nil {
						got <- result{err: err}
						return
					}
					b, err := io.ReadAll(r.Body)
					r.Body.Close()
					got <- result{string(b), err}
				}()
				eventually(t, "the second request queued", func() bool { return ft.Stats().Pool.Waits >= 1 })
				if tc.sc != straySameSegment {
					close(srv.goSignal)
				}
				<-srv.done
				time.Sleep(time.Millisecond) // what the server sent is in the client's socket
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "ok" {
					t.Fatalf("first body %q, %v", b, err)
				}
				r := <-got
				if r.err != nil || r.body != "ok2" {
					t.Errorf("second %s: %q, %v; want ok2 on a new connection", tc.method, r.body, r.err)
				}
				if n := srv.oldReqs.Load(); n != 1 {
					t.Errorf("the old connection carried %d requests, want 1", n)
				}
			})
		})
	}
}
