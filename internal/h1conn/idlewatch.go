package h1conn

import (
	"errors"
	"os"
	"time"
)

// Watching an idle connection whose socket ferry cannot reach.
//
// FitForReuse learns whether anything arrived on an idle connection by
// reading its socket without blocking (alive_unix.go). A connection from a
// DialContext that wraps its socket (no SyscallConn) hides the socket, and
// a read with a deadline already past never reaches it (Go's poller fails
// such a read first), so a FIN or bytes that came while the connection sat
// idle went unseen: a request that could not be retried was sent on a
// connection the server had closed, and failed, where net/http (whose read
// loop is always reading) sends it on a new one. So while such a
// connection is idle a goroutine reads it, as net/http's read loop would
// (watchIdle); the request that takes it stops that read with a deadline in
// the past and looks at what it found (endIdleWatch). A connection whose
// socket ferry reaches, the usual case, starts nothing.

// SocketStandIn is implemented by in-memory test connections that stand
// in for a socket in benchmarks of the socket path (the transport's
// BenchmarkRoundTripInMemory): they are not watched while idle, so that
// the benchmark measures what a request over a socket costs. Their Read
// need not honour deadlines.
type SocketStandIn interface{ StandsInForSocket() }

// watchIdle starts reading pc, which is about to go idle, if its socket is
// hidden and no read runs yet (a connection given back unused keeps the
// read it had). It runs on the goroutine handing pc to the pool, before the
// pool can hand it on; the goroutine that takes pc next ends the read in
// FitForReuse. Closing pc (the pool expiring, evicting or refusing it) ends
// the read too, so the goroutine never outlives the connection.
func (pc *Conn) watchIdle() {
	if pc.watching || !pc.socketHidden() {
		return
	}
	if pc.watchRes == nil {
		pc.watchRes = make(chan error, 1)
	}
	pc.watching = true
	go pc.readWhileIdle()
}

// readWhileIdle is the idle read: it reports the read's error, nil when
// bytes arrived. The channel has room for it, so a read that ends because
// the connection was closed, with no one to take the result, still exits.
func (pc *Conn) readWhileIdle() {
	_, err := pc.br.Peek(1)
	pc.watchRes <- err
}

// endIdleWatch stops the idle read and reports whether the connection
// stayed quiet: the read ended only because of the deadline set here.
// Bytes that arrived are left in pc.br; the caller closes the connection.
// A read that had not reached the socket yet when the deadline was set
// (pc taken within microseconds of going idle, as when it is handed
// straight to a waiting request) fails without reading, and finds nothing:
// FitForReuse then reads for a moment itself when bytes from before the
// previous response's end may be left (quietForAWhile).
func (pc *Conn) endIdleWatch() bool {
	pc.watching = false
	pc.conn.SetReadDeadline(aLongTimeAgo)
	err := <-pc.watchRes
	pc.conn.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}
