//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package h1conn

import "syscall"

// socketSendBuffer cannot read the send buffer size here: every request
// body goes to the body writer, as in net/http.
func socketSendBuffer(syscall.RawConn) (int, bool) { return 0, false }
