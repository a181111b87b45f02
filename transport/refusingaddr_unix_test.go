//go:build unix

package transport

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// refusingAddr returns a loopback address where connections are refused
// and that stays so for the whole test: a TCP socket is bound to it and
// never listens (a connect gets a reset), and while it is bound no other
// socket, of this process or another test binary running in parallel, can
// take the port. (Closing a listener to free a port leaves a window in
// which another test's server may bind it, and the "refused" dial then
// reaches that server.)
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
