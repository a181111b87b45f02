package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// In-process proxies for the proxy tests: an HTTP(S) proxy that forwards
// absolute-form requests and tunnels CONNECT, and a SOCKS5 server. Both
// record what they saw, count connections, and reach "*.test" names by
// mapping them to loopback (so no test ever resolves or dials a real host).

// loopbackNames maps "name.test:port" to "127.0.0.1:port"; anything else is
// returned unchanged.
func loopbackNames(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && strings.HasSuffix(host, ".test") {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// dialLoopbackNames is a DialContext that maps ".test" names to loopback.
func dialLoopbackNames(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, loopbackNames(addr))
}

// connSet tracks hijacked or tunnelled connections so cleanup can close
// them and wait for their copy goroutines.
type connSet struct {
	mu     sync.Mutex // guards conns and closed, and orders wg.Add before closeAll's Wait
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// add tracks c and counts n goroutines about to serve it; once closeAll has
// run it closes c instead and reports false.
func (s *connSet) add(c net.Conn, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]bool{}
	}
	s.conns[c] = true
	s.wg.Add(n)
	return true
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// splice copies both ways between a and b until either side ends, then
// closes both.
func (s *connSet) splice(a io.Reader, ac, bc net.Conn) {
	if !s.add(ac, 0) || !s.add(bc, 2) {
		ac.Close()
		bc.Close()
		return
	}
	go func() {
		defer s.wg.Done()
		io.Copy(bc, a)
		bc.Close()
		ac.Close()
	}()
	go func() {
		defer s.wg.Done()
		io.Copy(ac, bc)
		ac.Close()
		bc.Close()
	}()
}

// testProxy is an in-process HTTP proxy (HTTPS when started with a cert).
type testProxy struct {
	addr string
	tls  bool

	requireAuth string // when set, requests without this Proxy-Authorization get 407

	mu    sync.Mutex // guards conns, lines, auths, tags
	conns int
	lines []string   // "METHOD request-target" as received
	auths [][]string // Proxy-Authorization values of each request
	tags  [][]string // X-Proxy-Tag values of each request

	srv     *httptest.Server
	fwd     *http.Transport // forwards absolute-form requests
	tunnels connSet
}

func startTestProxy(t *testing.T, cert *selfsigned.Cert, requireAuth string) *testProxy {
	p := &testProxy{requireAuth: requireAuth, fwd: &http.Transport{DialContext: dialLoopbackNames, DisableCompression: true}}
	p.srv = httptest.NewUnstartedServer(p)
	p.srv.Config.ErrorLog = nilLogger()
	p.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			p.mu.Lock()
			p.conns++
			p.mu.Unlock()
		}
	}
	if cert != nil {
		p.tls = true
		p.srv.TLS = cert.ServerConfig()
		p.srv.TLS.NextProtos = []string{"http/1.1"}
		p.srv.StartTLS()
	} else {
		p.srv.Start()
	}
	p.addr = p.srv.Listener.Addr().String()
	t.Cleanup(func() {
		p.srv.Close()
		p.tunnels.closeAll()
		p.fwd.CloseIdleConnections()
	})
	return p
}

// url returns the proxy's URL, with user info when user is set.
func (p *testProxy) url(user, pass string) *url.URL {
	u := &url.URL{Scheme: "http", Host: p.addr}
	if p.tls {
		u.Scheme = "https"
	}
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return u
}

// proxySeen is what a testProxy saw.
type proxySeen struct {
	Conns int
	Lines []string
	Auths [][]string
	Tags  [][]string
}

func (p *testProxy) seen() proxySeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return proxySeen{p.conns, append([]string(nil), p.lines...), append([][]string(nil), p.auths...), append([][]string(nil), p.tags...)}
}

func (p *testProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.lines = append(p.lines, r.Method+" "+r.RequestURI)
	p.auths = append(p.auths, r.Header.Values("Proxy-Authorization"))
	p.tags = append(p.tags, r.Header.Values("X-Proxy-Tag"))
	p.mu.Unlock()
	if p.requireAuth != "" && r.Header.Get("Proxy-Authorization") != p.requireAuth {
		w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
		return
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	out.Header.Del("Proxy-Connection")
	resp, err := p.fwd.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vv := range resp.Header {
		w.Header()[k] = vv
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *testProxy) connect(w http.ResponseWriter, r *http.Request) {
	target, err := net.DialTimeout("tcp", loopbackNames(r.Host), 5*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		target.Close()
		return
	}
	brw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	brw.Flush()
	p.tunnels.splice(brw, conn, target)
}

// testSOCKS is an in-process SOCKS5 server (RFC 1928, CONNECT only) with
// optional user/password authentication (RFC 1929).
type testSOCKS struct {
	addr       string
	user, pass string // required credentials; "" means no authentication
	failCode   byte   // non-zero: answer every CONNECT with this reply code

	mu      sync.Mutex // guards conns and targets
	conns   int
	targets []string // CONNECT addresses as received ("name:port" or "ip:port")

	ln      net.Listener
	tunnels connSet
}

func startTestSOCKS(t *testing.T, user, pass string, failCode byte) *testSOCKS {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testSOCKS{addr: ln.Addr().String(), user: user, pass: pass, failCode: failCode, ln: ln}
	s.tunnels.add(acceptLoopConn{}, 1)
	go func() {
		defer s.tunnels.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
			if !s.tunnels.add(c, 1) {
				continue
			}
			go func() {
				defer s.tunnels.wg.Done()
				if !s.handshake(c) {
					c.Close()
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.tunnels.closeAll()
	})
	return s
}

func (s *testSOCKS) url(scheme string, withAuth bool) *url.URL {
	u := &url.URL{Scheme: scheme, Host: s.addr}
	if withAuth {
		u.User = url.UserPassword(s.user, s.pass)
	}
	return u
}

func (s *testSOCKS) seen() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, append([]string(nil), s.targets...)
}

var errSOCKS = errors.New("socks protocol error")

// handshake runs the server side; true means the connection now tunnels.
func (s *testSOCKS) handshake(c net.Conn) bool {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	read := func(n int) []byte {
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			panic(errSOCKS)
		}
		return b
	}
	ok := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil && r != errSOCKS {
				panic(r)
			}
		}()
		hdr := read(2)
		methods := read(int(hdr[1]))
		want := byte(0)
		if s.user != "" {
			want = 2
		}
		if hdr[0] != 5 || !strings.ContainsRune(string(methods), rune(want)) {
			c.Write([]byte{5, 0xff})
			return false
		}
		c.Write([]byte{5, want})
		if want == 2 {
			ver := read(1)
			user := string(read(int(read(1)[0])))
			pass := string(read(int(read(1)[0])))
			if ver[0] != 1 || user != s.user || pass != s.pass {
				c.Write([]byte{1, 1})
				return false
			}
			c.Write([]byte{1, 0})
		}
		req := read(4)
		if req[0] != 5 || req[1] != 1 {
			c.Write([]byte{5, 7, 0, 1, 0, 0, 0, 0, 0, 0})
			return false
		}
		var host string
		switch req[3] {
		case 1:
			host = net.IP(read(4)).String()
		case 4:
			host = net.IP(read(16)).String()
		case 3:
			host = string(read(int(read(1)[0])))
		default:
			return false
		}
		target := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(read(2)))))
		s.mu.Lock()
		s.targets = append(s.targets, target)
		s.mu.Unlock()
		if s.failCode != 0 {
			c.Write([]byte{5, s.failCode, 0, 1, 0, 0, 0, 0, 0, 0})
			return false
		}
		up, err := net.DialTimeout("tcp", loopbackNames(target), 5*time.Second)
		if err != nil {
			c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
			return false
		}
		c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
		c.SetDeadline(time.Time{})
		s.tunnels.splice(br, c, up)
		return true
	}()
	return ok
}

// acceptLoopConn stands for the accept loop in a connSet.
type acceptLoopConn struct{ net.Conn }

func (acceptLoopConn) Close() error { return nil }

// tlsTestConfig trusts cert (used by origins and HTTPS proxies alike).
func tlsTestConfig(cert *selfsigned.Cert) *tls.Config { return cert.ClientConfig() }
