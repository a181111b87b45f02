//go:build linux

package dialer

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	v4 = netip.MustParseAddr("127.0.0.1")
	v6 = netip.MustParseAddr("::1")
)

// server is a real loopback TCP listener that accepts connections, reads each
// until EOF and reports when the peer closed it.
type server struct {
	ln       net.Listener
	port     uint16
	wg       sync.WaitGroup
	accepted chan net.Addr // remote address of each accepted conn
	closed   chan net.Addr // remote address of each conn whose peer closed it
}

func listen(t *testing.T, addr string) *server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, ln)
}

func serve(t *testing.T, ln net.Listener) *server {
	s := &server{
		ln:       ln,
		port:     uint16(ln.Addr().(*net.TCPAddr).Port),
		accepted: make(chan net.Addr, 64),
		closed:   make(chan net.Addr, 64),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted <- c.RemoteAddr()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				buf := make([]byte, 64)
				for {
					if _, err := c.Read(buf); err != nil {
						s.closed <- c.RemoteAddr()
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// v6Listen listens on [::1]:port, skipping the test when IPv6 loopback is
// unavailable.
func v6Listen(t *testing.T, port uint16) *server {
	t.Helper()
	ln, err := net.Listen("tcp6", netip.AddrPortFrom(v6, port).String())
	if err != nil {
		if port == 0 {
			t.Skipf("IPv6 loopback ::1 unavailable, skipping dual-stack case: %v", err)
		}
		t.Skipf("[::1]:%d not available for the dual-stack case: %v", port, err)
	}
	return serve(t, ln)
}

// refusedV4Port returns a port that is free on 127.0.0.1 (connecting is
// refused) but listened on at [::1] by the returned server.
func refusedV4Port(t *testing.T) (uint16, *server) {
	t.Helper()
	s6 := v6Listen(t, 0)
	if s6 == nil {
		return 0, nil
	}
	// Check nothing listens on 127.0.0.1 at that port.
	c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(v4, s6.port).String(), time.Second)
	if err == nil {
		c.Close()
		t.Skipf("127.0.0.1:%d is in use by someone else", s6.port)
	}
	if !errors.Is(err, unix.ECONNREFUSED) {
		t.Skipf("127.0.0.1:%d did not refuse: %v", s6.port, err)
	}
	return s6.port, s6
}

// hangingV4 returns a port on 127.0.0.1 whose SYNs are never answered: a
// listener with backlog 0 whose accept queue is already full and that never
// accepts. The kernel drops further SYNs, so a connect there hangs until it
// is cancelled or times out.
func hangingV4(t *testing.T) uint16 {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "hanging-listener")
	t.Cleanup(func() { f.Close() })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(sa.(*unix.SockaddrInet4).Port)
	addr := netip.AddrPortFrom(v4, port).String()
	for range 8 {
		c, err := net.DialTimeout("tcp4", addr, 300*time.Millisecond)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return port // the queue is full: SYNs are dropped now
			}
			t.Fatalf("filling the backlog: %v", err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("could not fill a backlog-0 accept queue on this kernel")
	return 0
}

// hangingDualStack returns a port hanging on 127.0.0.1 and served on [::1].
func hangingDualStack(t *testing.T) (uint16, *server) {
	t.Helper()
	port := hangingV4(t)
	return port, v6Listen(t, port)
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count fds: %v", err)
	}
	return len(ents)
}

// waitFDs waits (bounded) for the fd count to come back to want: closes of
// accepted server-side conns finish on other goroutines.
func waitFDs(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := openFDs(t)
		if got <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fd leak: %d open, want %d", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
