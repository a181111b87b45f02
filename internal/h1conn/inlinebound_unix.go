//go:build linux || darwin || freebsd || netbsd || openbsd

package h1conn

import "syscall"

// socketSendBuffer reads SO_SNDBUF of rc's socket (one getsockopt).
func socketSendBuffer(rc syscall.RawConn) (int, bool) {
	var v int
	var gerr error
	err := rc.Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	})
	if err != nil || gerr != nil {
		return 0, false
	}
	return v, true
}
