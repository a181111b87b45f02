package h1conn

import (
	"errors"
	"net/http"
	"os"
	"runtime"
	"time"
)

// quietCheckIdle is how long a connection must have been idle for
// FitForReuse to check a replayable request's connection with a system
// call.
const quietCheckIdle = 100 * time.Microsecond

// FitForReuse reports whether pc, just taken from the pool after idleFor,
// may carry req. A connection that received anything while idle is not
// used: EOF or a reset (the server closed it), or bytes nobody asked for,
// such as the "408 Request Timeout" some servers send on an idle
// keep-alive connection before closing it, which would be taken for req's
// response (net/http's read loop sees them, and closes the connection).
// Bytes already buffered are seen at no cost. The socket is read (one
// system call) before a request that could not be retried, and before any
// request once the connection sat idle for quietCheckIdle: a client that
// sends back to back pays nothing, a client that waits between requests
// pays a system call that is small against its wait. Bytes that arrive
// within quietCheckIdle of the previous response's end, on a connection
// reused for a replayable request at once, are not seen before the
// request goes out. A connection whose socket is hidden behind a
// DialContext wrapper was read by a goroutine while idle instead
// (idlewatch.go), which sees everything that came.
func (pc *Conn) FitForReuse(req *http.Request, idleFor time.Duration) bool {
	if pc.watching {
		// A goroutine has read the connection since it went idle
		// (idlewatch.go): it saw whatever arrived, through TLS too.
		return pc.endIdleWatch()
	}
	if pc.br.Buffered() > 0 {
		return false
	}
	if idleFor < quietCheckIdle && IsReplayable(req) {
		return true
	}
	return pc.quiet()
}

// aliveByDeadline peeks with a deadline already past: a timeout means the
// connection is quiet and alive; EOF, an error or data means it is not.
func (pc *Conn) aliveByDeadline() bool {
	pc.conn.SetReadDeadline(aLongTimeAgo)
	_, err := pc.br.Peek(1)
	pc.conn.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// yieldProcessor lets another goroutine run (the body writer finishing).
func yieldProcessor() { runtime.Gosched() }
