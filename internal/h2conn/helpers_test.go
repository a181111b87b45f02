package h2conn

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	certOnce sync.Once
	cert     *selfsigned.Cert
	certErr  error
)

func testCert(t testing.TB) *selfsigned.Cert {
	t.Helper()
	certOnce.Do(func() { cert, certErr = selfsigned.New() })
	if certErr != nil {
		t.Fatal(certErr)
	}
	return cert
}

// testServer is a real loopback net/http server speaking HTTP/2 over TLS
// (tls true) or cleartext HTTP/2 with prior knowledge.
type testServer struct {
	srv  *http.Server
	ln   net.Listener
	tls  bool
	done chan struct{}
}

func startServer(t testing.TB, useTLS bool, h2 *http.HTTP2Config, h http.Handler) *testServer {
	t.Helper()
	return startServerProtos(t, useTLS, true, h2, h)
}

// startServerProtos is startServer with HTTP/2 switchable off (a TLS server
// that only negotiates http/1.1).
func startServerProtos(t testing.TB, useTLS, withH2 bool, h2 *http.HTTP2Config, h http.Handler) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	srv := &http.Server{Handler: h, HTTP2: h2, Protocols: &protos, ErrorLog: log.New(io.Discard, "", 0)}
	if useTLS {
		protos.SetHTTP1(true)
		protos.SetHTTP2(withH2)
		srv.TLSConfig = testCert(t).ServerConfig()
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	s := &testServer{srv: srv, ln: ln, tls: useTLS, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if useTLS {
			srv.ServeTLS(ln, "", "")
		} else {
			srv.Serve(ln)
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) close() {
	s.srv.Close()
	<-s.done
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

func (s *testServer) url(path string) string {
	if s.tls {
		return "https://" + s.addr() + path
	}
	return "http://" + s.addr() + path
}

// dialH2 dials addr and negotiates h2 (TLS) or nothing (cleartext).
func dialH2(t testing.TB, addr string, useTLS bool) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if !useTLS {
		return nc
	}
	cfg := testCert(t).ClientConfig()
	cfg.ServerName = "127.0.0.1"
	cfg.NextProtos = []string{"h2", "http/1.1"}
	tc := tls.Client(nc, cfg)
	if err := tc.Handshake(); err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return tc
}

// newConn dials s and wraps the connection; the conn is closed at cleanup.
func newConn(t testing.TB, s *testServer, cfg Config) *Conn {
	t.Helper()
	c, err := NewClientConn(dialH2(t, s.addr(), s.tls), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newRequest(t testing.TB, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// goRoundTrip sends req on c from a goroutine of its own, closes the body
// of a response, and hands over the error.
func goRoundTrip(c *Conn, req *http.Request) <-chan error {
	done := make(chan error, 1)
	go func() {
		resp, err := c.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	return done
}

// readAll reads and closes a response body.
func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor polls cond until it holds, failing the test after a generous
// bound. It waits for asynchronous protocol events (a GOAWAY read by the
// reader goroutine, a health check): it asserts that they happen, not how
// fast.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stallProxy forwards one TCP connection to a backend until stall is set,
// after which it swallows everything in both directions (a peer that
// stopped answering without closing).
type stallProxy struct {
	ln      net.Listener
	backend string
	stalled atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex // guards conns
	conns   []net.Conn
}

func startStallProxy(t testing.TB, backend string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, backend: backend}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(b, c)
		go p.pipe(c, b)
	}
}

func (p *stallProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// roundTripResult is what a RoundTrip run on another goroutine returned.
type roundTripResult struct {
	resp *http.Response
	err  error
}

// streamsSettled reports whether c counts no stream reserved or open.
func streamsSettled(c *Conn) bool {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	return c.o.reserved == 0 && len(c.o.streams) == 0
}

// goAwaySeen reports whether c has read the server's GOAWAY (it is no
// longer usable).
func goAwaySeen(c *Conn) bool { return !c.Usable() }

// connClosedSeen reports whether c has seen its connection close (it is no
// longer usable).
func connClosedSeen(c *Conn) bool { return !c.Usable() }

// peerSettingsKnown reports whether c knows the server's SETTINGS: their
// frame was processed (or given up on).
func peerSettingsKnown(c *Conn) bool {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	return c.o.settled
}
