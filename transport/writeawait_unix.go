//go:build linux || darwin || freebsd || netbsd || openbsd

package transport

import (
	"net"
	"syscall"
)

// Writing a request and waiting for its response with one system call
// fewer, on a cleartext TCP connection.
//
// The usual way costs three: write the request, read (nothing yet:
// EAGAIN, which parks the goroutine until the runtime's poller reports
// the socket readable) and read again. The runtime has to try that first
// read: arming the wait forgets a readiness it saw earlier, and bytes that
// came before the wait was armed would otherwise never wake it. Here the
// wait is armed first (syscall.RawConn.Read), the request is written from
// inside it, and only then does the goroutine park: whatever answers the
// request comes after the write, so it wakes the wait. The first read then
// finds the response. A partial write or an error ends the wait at once
// and leaves the rest to net.Conn.Write, so errors, deadlines and
// cancellation (a past deadline set by an abort ends the wait) behave as
// on the usual path.

// rawConnOf is conn's RawConn when conn is a cleartext TCP connection, nil
// otherwise.
func rawConnOf(conn net.Conn) syscall.RawConn {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// awaitState is one writeAwait in progress. The connection keeps it and
// its step function (made once per connection), so a request allocates
// nothing for it.
type awaitState struct {
	p       []byte // the request bytes
	n       int    // how many were written
	started bool   // the write was attempted
}

// awaitStep is the RawConn.Read callback: the first call writes, a later
// one (the socket became readable) ends the wait.
func (pc *h1Conn) awaitStep(fd uintptr) bool {
	a := &pc.await
	if a.started {
		return true // readable: the response (or EOF, or an error) is there
	}
	a.started = true
	for a.n < len(a.p) {
		m, err := syscall.Write(int(fd), a.p[a.n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			return true // EAGAIN or a failure: conn.Write takes over
		}
		a.n += m
	}
	return false // all written: wait for the answer
}

// writeAwait writes p to the connection and returns once the socket is
// readable (or the wait ended with an error, left for the read to find).
// It reports what net.Conn.Write would.
func (pc *h1Conn) writeAwait(p []byte) (int, error) {
	if pc.awaitFn == nil {
		pc.awaitFn = pc.awaitStep
	}
	pc.await = awaitState{p: p}
	pc.raw.Read(pc.awaitFn)
	n := pc.await.n
	pc.await = awaitState{}
	if n == len(p) {
		return n, nil
	}
	m, err := pc.conn.Write(p[n:])
	if err == nil {
		pc.armHeaderTimeout() // the request is out only now
	}
	return n + m, err
}
