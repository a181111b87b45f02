//go:build linux

package sockopt

import (
	"net"
	"os"
	"testing"
)

// loopbackConn returns the client side of a real loopback TCP connection on
// network ("tcp4" or "tcp6"), skipping when that loopback is unavailable.
// Both ends are closed at cleanup.
func loopbackConn(t testing.TB, network string) *net.TCPConn {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "tcp6" {
		addr = "[::1]:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		if network == "tcp6" {
			t.Skipf("IPv6 loopback ::1 unavailable on this machine: %v", err)
		}
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		c.Close()
		t.Fatal("accept failed")
	}
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c.(*net.TCPConn)
}

// countingSetter wraps Setsockopt and counts the calls it passes on.
type countingSetter struct {
	calls int
	fail  error // returned instead of making the call, when set
}

func (s *countingSetter) set(fd uintptr, fam Family, opt Option, value int) error {
	s.calls++
	if s.fail != nil {
		return s.fail
	}
	return Setsockopt(fd, fam, opt, value)
}

func newFile(fd int, name string) *os.File { return os.NewFile(uintptr(fd), name) }
