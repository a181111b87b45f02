//go:build linux || darwin || freebsd || netbsd || openbsd

package transport

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// alive reports whether an idle connection still looks usable: nothing
// buffered, and a non-blocking peek at the socket finds neither EOF, an
// error nor unsolicited bytes. It costs one recvfrom syscall and is used
// only before a request that could not be retried.
func (pc *h1Conn) alive() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	var raw net.Conn = pc.conn
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return pc.aliveByDeadline()
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, rerr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		alive = rerr == unix.EAGAIN || rerr == unix.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
