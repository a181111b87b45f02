package server

import (
	"context"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// drainIdleAfter is how long an HTTP/3 connection must have been without a
// running handler before Shutdown closes it. It is net/http's allowance for
// a new TCP connection that has not sent a request yet. net/http closes a
// used idle TCP connection at once, because the kernel still delivers the
// bytes already written; closing a QUIC connection drops response data not
// yet acknowledged, so a used HTTP/3 connection gets the same allowance,
// counted from its last handler's return. Clients that honour GOAWAY close
// the connection themselves long before.
const drainIdleAfter = 5 * time.Second

// quicConns is the set of open HTTP/3 connections, so that Close can end
// them with CONNECTION_CLOSE (closing the quic.Transport alone drops them
// silently, and clients would wait for their idle timeout) and Shutdown can
// close those left idle by a client that ignores GOAWAY. It costs a map
// insert and delete per connection, and a lock per request to count it.
type quicConns struct {
	// idleAfter replaces drainIdleAfter when positive; tests shorten it.
	idleAfter time.Duration

	mu       sync.Mutex // guards conns and draining
	conns    map[*quic.Conn]*connActivity
	draining bool // Shutdown has begun: idle connections get closed
}

// connActivity counts the handlers running on one HTTP/3 connection. A
// connection is idle when none is; while draining, a timer closes it once
// it has been idle for the allowance.
type connActivity struct {
	conn      *quic.Conn
	idleAfter time.Duration

	mu        sync.Mutex // guards the fields below
	inFlight  int        // handlers running
	idleSince time.Time  // when inFlight last became zero, or the connection was added
	draining  bool
	closed    bool        // the connection has ended; no timer may be armed
	timer     *time.Timer // closes the connection once idle long enough; nil until needed
}

// activityKey is the connection context key under which the HTTP/3
// handler finds the connection's *connActivity.
type activityKey struct{}

// add records c until its context ends (the connection closed) and returns
// its activity counter.
func (q *quicConns) add(c *quic.Conn) *connActivity {
	a := &connActivity{conn: c, idleAfter: q.idleAfter, idleSince: time.Now()}
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

// drain starts closing connections as they become idle (see
// drainIdleAfter), the HTTP/3 side of net/http's closing of idle
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

// begin counts a handler starting.
func (a *connActivity) begin() {
	a.mu.Lock()
	a.inFlight++
	a.mu.Unlock()
}

// end counts a handler returning; while draining, the last one arms the
// idle timer.
func (a *connActivity) end() {
	a.mu.Lock()
	a.inFlight--
	if a.inFlight == 0 {
		a.idleSince = time.Now()
		if a.draining {
			a.armLocked(a.idleAfter)
		}
	}
	a.mu.Unlock()
}

func (a *connActivity) startDrain() {
	a.mu.Lock()
	a.draining = true
	if a.inFlight == 0 {
		a.armLocked(time.Until(a.idleSince.Add(a.idleAfter)))
	}
	a.mu.Unlock()
}

// armLocked (re)starts the idle timer to fire after d (at once when d <=
// 0). a.mu is held.
func (a *connActivity) armLocked(d time.Duration) {
	if a.closed {
		return
	}
	if a.timer == nil {
		a.timer = time.AfterFunc(d, a.closeIfIdle)
	} else {
		a.timer.Reset(d)
	}
}

// closeIfIdle is the idle timer: it closes the connection if no handler
// has run for the allowance, or re-arms for the rest of it.
func (a *connActivity) closeIfIdle() {
	a.mu.Lock()
	if a.inFlight > 0 || a.closed {
		a.mu.Unlock() // the last handler to return re-arms
		return
	}
	if rest := time.Until(a.idleSince.Add(a.idleAfter)); rest > 0 {
		a.armLocked(rest)
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	a.close()
}

// close closes the connection with H3_NO_ERROR, outside any lock.
func (a *connActivity) close() {
	a.conn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
}

// stop disarms the idle timer once the connection has ended.
func (a *connActivity) stop() {
	a.mu.Lock()
	a.closed = true
	if a.timer != nil {
		a.timer.Stop()
	}
	a.mu.Unlock()
}
