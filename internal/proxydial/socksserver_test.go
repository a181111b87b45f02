package proxydial

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// socksServer is an in-process SOCKS5 server (RFC 1928, RFC 1929) for
// edge cases: optional user/password, a forced reply code, and a record of
// how each target was addressed (name or IP).
type socksServer struct {
	ln         net.Listener
	user, pass string // required when user != ""
	replyCode  byte   // 0 relays; anything else is sent as the failure code

	mu      sync.Mutex // guards targets
	targets []string   // "fqdn:host:port" or "ip:addr:port"
}

func newSOCKSServer(t *testing.T, user, pass string, replyCode byte) *socksServer {
	s := &socksServer{user: user, pass: pass, replyCode: replyCode}
	s.ln = serveLoopback(t, nil, s.handle)
	return s
}

func (s *socksServer) addr() string { return s.ln.Addr().String() }

func (s *socksServer) seenTargets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.targets...)
}

func (s *socksServer) handle(c net.Conn) {
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(c, hdr); err != nil || hdr[0] != 5 {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return
	}
	want := byte(0)
	if s.user != "" {
		want = 2
	}
	offered := false
	for _, m := range methods {
		offered = offered || m == want
	}
	if !offered {
		c.Write([]byte{5, 0xff})
		return
	}
	c.Write([]byte{5, want})
	if want == 2 && !s.authenticate(c) {
		return
	}
	req := make([]byte, 4)
	if _, err := io.ReadFull(c, req); err != nil || req[1] != 1 {
		return
	}
	var host, kind string
	switch req[3] {
	case 1, 4:
		ip := make(net.IP, 4)
		if req[3] == 4 {
			ip = make(net.IP, 16)
		}
		if _, err := io.ReadFull(c, ip); err != nil {
			return
		}
		host, kind = ip.String(), "ip"
	case 3:
		n := make([]byte, 1)
		if _, err := io.ReadFull(c, n); err != nil {
			return
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(c, name); err != nil {
			return
		}
		host, kind = string(name), "fqdn"
	default:
		return
	}
	pb := make([]byte, 2)
	if _, err := io.ReadFull(c, pb); err != nil {
		return
	}
	target := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(pb))))
	s.mu.Lock()
	s.targets = append(s.targets, kind+":"+target)
	s.mu.Unlock()
	reply := []byte{5, s.replyCode, 0, 1, 127, 0, 0, 1, 0, 0}
	if s.replyCode != 0 {
		c.Write(reply)
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		reply[1] = 5 // connection refused
		c.Write(reply)
		return
	}
	defer up.Close()
	c.Write(reply)
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.Close()
	<-done
}

func (s *socksServer) authenticate(c net.Conn) bool {
	b := make([]byte, 2)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 1 {
		return false
	}
	user := make([]byte, b[1])
	if _, err := io.ReadFull(c, user); err != nil {
		return false
	}
	if _, err := io.ReadFull(c, b[:1]); err != nil {
		return false
	}
	pass := make([]byte, b[0])
	if _, err := io.ReadFull(c, pass); err != nil {
		return false
	}
	if string(user) != s.user || string(pass) != s.pass {
		c.Write([]byte{1, 1})
		return false
	}
	c.Write([]byte{1, 0})
	return true
}
