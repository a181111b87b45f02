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
// call, when nothing from before the previous response's end can be left
// below its read buffer.
const quietCheckIdle = 100 * time.Microsecond

// leftoverWait bounds the read that looks for bytes left behind the
// previous response on a connection whose socket cannot be read without
// blocking (quietForAWhile).
const leftoverWait = time.Millisecond

// FitForReuse reports whether pc, just taken from the pool after idleFor,
// may carry req. A connection that received anything past the end of its
// previous response is not used: EOF or a reset (the server closed it), or
// bytes nobody asked for, such as the "408 Request Timeout" some servers
// send on an idle keep-alive connection before closing it, or a second
// response a broken server wrote after the first, which would be taken for
// req's response (net/http's read loop sees them, and closes the
// connection).
//
// Such bytes may wait in three places. In pc.br, seen at no cost. In the
// socket, when the read that delivered the response's end filled the
// buffer it was given (readFilled; a large body read with io.Copy reads
// exactly what is left of it, so bytes behind it stay in the socket); a
// read that did not fill its buffer emptied the socket, so bytes there now
// came after the response ended. And inside a TLS layer, which may hold
// whole records it read with the response's last one. (Part of a record
// whose rest is still on its way is out of reach: tls.Conn holds it, and
// the peek fails on the missing rest as on a quiet connection.)
//
// The socket is read (one system call, alive_unix.go) and a TLS layer
// peeked (no system call) before a request that could not be retried, on
// every TLS connection, after a read that filled its buffer, and once the
// connection sat idle for quietCheckIdle. So only a plain TCP connection
// whose last read emptied the socket, reused for a replayable request at
// once, goes unchecked: a client that sends back to back pays nothing, a
// client that waits between requests pays a system call that is small
// against its wait, and bytes that arrive within quietCheckIdle of the
// previous response's end, in a later segment, are not seen before the
// request goes out (net/http's read loop may miss them too).
//
// A connection whose socket is hidden behind a DialContext wrapper was
// read by a goroutine while idle instead (idlewatch.go), which sees
// everything that came, through TLS too, unless the connection was taken
// before that read began; so after a read that filled its buffer it is
// also read for a moment (quietForAWhile). Under TLS that read is the TLS
// layer's, which says nothing of the socket below it: records still in
// that socket may go unseen when the idle read had not reached it.
func (pc *Conn) FitForReuse(req *http.Request, idleFor time.Duration) bool {
	if pc.watching {
		return pc.endIdleWatch() && (!pc.readFilled || pc.quietForAWhile())
	}
	if pc.br.Buffered() > 0 {
		return false
	}
	if idleFor < quietCheckIdle && IsReplayable(req) && !pc.readFilled && !pc.tlsLayered() {
		return true
	}
	return pc.quiet()
}

// aliveByDeadline peeks with a deadline already past: a timeout means the
// connection is quiet and alive; EOF, an error or data means it is not.
// Bytes a TLS layer holds are found; the socket itself is not read (Go's
// poller fails the read before it reaches the socket).
func (pc *Conn) aliveByDeadline() bool {
	pc.conn.SetReadDeadline(aLongTimeAgo)
	_, err := pc.br.Peek(1)
	pc.conn.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// quietForAWhile is a read that waits at most leftoverWait for a byte, for
// a connection whose socket ferry cannot read without blocking: a read with
// a deadline still ahead reaches the socket at once, so bytes waiting there
// are found, and a quiet connection costs the wait. It reports whether the
// wait ended with nothing read.
func (pc *Conn) quietForAWhile() bool {
	pc.conn.SetReadDeadline(time.Now().Add(leftoverWait))
	_, err := pc.br.Peek(1)
	pc.conn.SetReadDeadline(time.Time{})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	pc.readFilled = false // the socket was read and found empty
	return true
}

// yieldProcessor lets another goroutine run (the body writer finishing).
func yieldProcessor() { runtime.Gosched() }
