package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// drainIdleAfter is how long Shutdown gives an HTTP/3 connection that has
// never run a handler, counted from the connection's start, before closing
// it: net/http's allowance for a new TCP connection that has not sent a
// request. A connection that has run a handler is never closed this way,
// even once idle: its last response may still be queued or unread (flow
// control), and closing a QUIC connection discards it, where the kernel
// still delivers bytes written to a closed TCP connection. Such a
// connection is left to GOAWAY and Shutdown's context, as quic-go's own
// Shutdown leaves it.
const drainIdleAfter = 5 * time.Second

// quicConns is the set of open HTTP/3 connections, so that Close can end
// them with CONNECTION_CLOSE (closing the quic.Transport alone drops them
// silently, and clients would wait for their idle timeout) and Shutdown can
// close those a client opened and never used. It costs a map insert and
// delete per connection; a request on a connection already marked used
// costs one atomic load.
type quicConns struct {
	// idleAfter replaces drainIdleAfter when positive; tests shorten it.
	idleAfter time.Duration

	mu       sync.Mutex // guards conns and draining
	conns    map[*quic.Conn]*connActivity
	draining bool // Shutdown has begun: unused connections get closed
}

// connActivity records whether a handler has run on one HTTP/3 connection.
// While draining, a timer closes a connection that never ran one once it
// is drainIdleAfter old.
type connActivity struct {
	conn      *quic.Conn
	idleAfter time.Duration
	start     time.Time // when the connection was added

	// used: a handler has been called on the connection. Set under mu
	// (with the timer stopped); read without it on the request path.
	used atomic.Bool

	mu     sync.Mutex  // guards the fields below, and orders used with them
	closed bool        // the connection has ended; no timer may be armed
	timer  *time.Timer // closes the unused connection; nil until draining
}

// activityKey is the connection context key under which the HTTP/3
// handler finds the connection's *connActivity.
type activityKey struct{}

// add records c until its context ends (the connection closed) and returns
// its activity record.
func (q *quicConns) add(c *quic.Conn) *connActivity {
	a := &connActivity{conn: c, idleAfter: q.idleAfter, start: time.Now()}
	if a.idleAfter <= 0 {
		a.idleAfter = drainIdleAfter
	}
	q.mu.Lock()
	if q.conns == nil {
		q.conns = make(map[*quic.Conn]*connActivity)
	}
	q.conns[c] = a
	draining := q.draining
	q.mu.Unlock()
	if draining { // accepted while Shutdown began
		a.startDrain()
	}
	context.AfterFunc(c.Context(), func() {
		q.mu.Lock()
		delete(q.conns, c)
		q.mu.Unlock()
		a.stop()
	})
	return a
}

// snapshot returns the open connections; the caller acts on them outside
// the lock.
func (q *quicConns) snapshot(drain bool) []*connActivity {
	q.mu.Lock()
	defer q.mu.Unlock()
	if drain {
		q.draining = true
	}
	open := make([]*connActivity, 0, len(q.conns))
	for _, a := range q.conns {
		open = append(open, a)
	}
	return open
}

// drain starts closing connections that never ran a handler (see
// drainIdleAfter), the HTTP/3 side of net/http's closing of new idle
// connections during Shutdown.
func (q *quicConns) drain() {
	for _, a := range q.snapshot(true) {
		a.startDrain()
	}
}

// closeAll closes every recorded connection with H3_NO_ERROR.
func (q *quicConns) closeAll() {
	for _, a := range q.snapshot(false) {
		a.close()
	}
}

// markUsed records that a handler runs on the connection: from now on the
// idle timer leaves it alone.
func (a *connActivity) markUsed() {
	if a.used.Load() {
		return
	}
	a.mu.Lock()
	if !a.used.Load() {
		a.used.Store(true)
		if a.timer != nil {
			a.timer.Stop()
		}
	}
	a.mu.Unlock()
}

// startDrain arms the timer that closes the connection drainIdleAfter after
// its start (at once if it is older) unless a handler has run on it.
func (a *connActivity) startDrain() {
	a.mu.Lock()
	if !a.used.Load() && !a.closed && a.timer == nil {
		a.timer = time.AfterFunc(time.Until(a.start.Add(a.idleAfter)), a.closeIfUnused)
	}
	a.mu.Unlock()
}

// closeIfUnused is the drain timer: it closes the connection unless a
// handler has started on it meanwhile.
func (a *connActivity) closeIfUnused() {
	a.mu.Lock()
	skip := a.used.Load() || a.closed
	a.mu.Unlock()
	if !skip {
		a.close()
	}
}

// close closes the connection with H3_NO_ERROR, outside any lock.
func (a *connActivity) close() {
	a.conn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
}

// stop disarms the drain timer once the connection has ended.
func (a *connActivity) stop() {
	a.mu.Lock()
	a.closed = true
	if a.timer != nil {
		a.timer.Stop()
	}
	a.mu.Unlock()
}
