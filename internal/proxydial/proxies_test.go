package proxydial

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// connTracker remembers a test server's open connections so that Close can
// shut them all and wait for their goroutines (goleak checks the rest).
type connTracker struct {
	wg sync.WaitGroup

	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
}

func (ct *connTracker) add(c net.Conn) bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.closed {
		return false
	}
	if ct.conns == nil {
		ct.conns = make(map[net.Conn]struct{})
	}
	ct.conns[c] = struct{}{}
	return true
}

func (ct *connTracker) closeAll() {
	ct.mu.Lock()
	ct.closed = true
	conns := ct.conns
	ct.conns = nil
	ct.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	ct.wg.Wait()
}

// serveLoopback listens on 127.0.0.1 and runs handle for every
// connection (wrapped in TLS when tlsCfg is set); stopped at cleanup.
func serveLoopback(t *testing.T, tlsCfg *tls.Config, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ct := &connTracker{}
	ct.wg.Add(1)
	go func() {
		defer ct.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !ct.add(c) {
				c.Close()
				return
			}
			ct.wg.Add(1)
			go func() {
				defer ct.wg.Done()
				defer c.Close()
				if tlsCfg != nil {
					c = tls.Server(c, tlsCfg)
				}
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		ct.closeAll()
	})
	return ln
}

// seenRequest is what an in-process proxy received.
type seenRequest struct {
	Method, URI, ProxyAuth, UserAgent, Host string
	Header                                  http.Header
}

// httpProxy is an in-process forwarding proxy: CONNECT opens a relayed
// tunnel; an absolute-form request is forwarded to its target in origin
// form, without Proxy-Authorization.
type httpProxy struct {
	ln       net.Listener
	wantAuth string // required Proxy-Authorization value; "" accepts anything

	mu   sync.Mutex // guards seen
	seen []seenRequest
}

func newHTTPProxy(t *testing.T, wantAuth string, tlsCfg *tls.Config) *httpProxy {
	p := &httpProxy{wantAuth: wantAuth}
	p.ln = serveLoopback(t, tlsCfg, p.handle)
	return p
}

func (p *httpProxy) addr() string { return p.ln.Addr().String() }

func (p *httpProxy) requests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

func (p *httpProxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		p.mu.Lock()
		p.seen = append(p.seen, seenRequest{Method: req.Method, URI: req.RequestURI, ProxyAuth: req.Header.Get("Proxy-Authorization"),
			UserAgent: req.Header.Get("User-Agent"), Host: req.Host, Header: req.Header.Clone()})
		p.mu.Unlock()
		if p.wantAuth != "" && req.Header.Get("Proxy-Authorization") != p.wantAuth {
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 6\r\n\r\ndenied")
			continue
		}
		if req.Method == http.MethodConnect {
			p.tunnel(c, br, req.Host)
			return
		}
		if !p.forward(c, req) {
			return
		}
	}
}

func (p *httpProxy) tunnel(c net.Conn, br *bufio.Reader, target string) {
	up, err := net.Dial("tcp", target)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{})
	go func() {
		io.Copy(up, br)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.Close()
	<-done
}

func (p *httpProxy) forward(c net.Conn, req *http.Request) bool {
	if req.URL.Host == "" || !strings.HasPrefix(req.RequestURI, "http://") {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
		return false
	}
	up, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return false
	}
	defer up.Close()
	req.Header.Del("Proxy-Authorization")
	req.RequestURI = ""
	if err := req.Write(up); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.Write(c) == nil
}

// scriptedProxy reads one request head per connection, records it, and
// lets reply answer however the test needs (bad replies, silence, ...).
type scriptedProxy struct {
	ln net.Listener

	mu    sync.Mutex // guards heads
	heads []string
}

func newScriptedProxy(t *testing.T, reply func(c net.Conn)) *scriptedProxy {
	p := &scriptedProxy{}
	p.ln = serveLoopback(t, nil, func(c net.Conn) {
		head, err := readHead(c)
		if err != nil {
			return
		}
		p.mu.Lock()
		p.heads = append(p.heads, head)
		p.mu.Unlock()
		reply(c)
	})
	return p
}

func (p *scriptedProxy) addr() string { return p.ln.Addr().String() }

func (p *scriptedProxy) lastHead() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.heads) == 0 {
		return ""
	}
	return p.heads[len(p.heads)-1]
}

// readHead reads byte by byte up to the blank line, so that nothing after
// the head is consumed.
func readHead(c net.Conn) (string, error) {
	var b strings.Builder
	one := make([]byte, 1)
	for !strings.HasSuffix(b.String(), "\r\n\r\n") {
		if _, err := io.ReadFull(c, one); err != nil {
			return b.String(), err
		}
		b.WriteByte(one[0])
	}
	return b.String(), nil
}
