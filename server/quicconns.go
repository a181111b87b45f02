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
// request.
const drainIdleAfter = 5 * time.Second

// goAwayGrace is how long Shutdown leaves an HTTP/3 connection that has run
// handlers, once none runs and its client has sent nothing, before closing
// it: the time the client has to act on GOAWAY and close the connection
// itself, as net/http's HTTP/2 server closes a connection 1s after GOAWAY
// once its streams have ended. The server's HTTP/3 IdleTimeout replaces it
// when shorter (quic-go closes an idle connection then anyway). The wait
// starts again with every packet the client sends: closing a QUIC
// connection discards response bytes the client has received but not
// read, where the kernel still delivers bytes written to a closed TCP
// connection, so a client still acknowledging or opening flow-control
// windows is left to finish, and only a silent one (gone, or cut off) is
// closed. A client that keeps a connection alive and ignores GOAWAY holds
// Shutdown until its context ends, as with quic-go's own Shutdown.
const goAwayGrace = 1 * time.Second

// closeSettle is how long Shutdown keeps the UDP socket open after it last
// closed a connection with closeDrained. quic-go writes the CONNECTION_CLOSE
// from the connection's own goroutine, and with the connection's context
// ended first nothing of quic-go's waits for that write: a socket closed
// at once lost it, and the client waited for its idle timeout. quic-go
// offers no signal for the write; it normally follows within microseconds.
const closeSettle = 20 * time.Millisecond

// quicConns is the set of open HTTP/3 connections, so that Close can end
// them with CONNECTION_CLOSE (closing the quic.Transport alone drops them
// silently, and clients would wait for their idle timeout) and Shutdown can
// close those a client opened and never used or has gone silent on. It
// costs a map insert and delete per connection, and two atomic additions
// and an atomic load per request.
type quicConns struct {
	// idleAfter replaces drainIdleAfter when positive; tests shorten it.
	idleAfter time.Duration
	// idleTimeout is the HTTP/3 server's IdleTimeout (zero: none); it
	// shortens goAwayGrace. Set before serving starts.
	idleTimeout time.Duration

	// lastDrained is when closeDrained last ran (UnixNano; zero: never).
	lastDrained atomic.Int64

	mu       sync.Mutex // guards conns and draining
	conns    map[*quic.Conn]*connActivity
	draining bool // Shutdown has begun: unused and silent connections get closed
}

// connActivity records the handlers that run on one HTTP/3 connection.
// While draining, a timer closes the connection once it is drainIdleAfter
// old if no handler ever ran on it, or once no handler has run and no
// packet has come from the client for goAwayGrace.
type connActivity struct {
	q         *quicConns
	conn      *quic.Conn
	cancel    context.CancelFunc // ends conn.Context() ahead of the close; nil if not ours
	idleAfter time.Duration
	grace     time.Duration
	start     time.Time // when the connection was added

	// used: a handler has been called on the connection. active: handlers
	// running. draining mirrors mu-guarded state for the request path.
	// Written without mu; the timer reads them under mu and re-checks, and
	// handlerDone arms the timer under mu.
	used     atomic.Bool
	active   atomic.Int64
	draining atomic.Bool

	mu      sync.Mutex  // guards the fields below
	closed  bool        // the connection has ended or is being closed; no timer may be armed
	timer   *time.Timer // the drain timer; nil until draining, and while a handler runs
	packets uint64      // packets received from the client when the timer was armed
}

// activityKey is the connection context key under which the HTTP/3
// handler finds the connection's *connActivity.
type activityKey struct{}

// connCancelKey is the context key under which closableConnContext keeps
// the function that cancels a QUIC connection's context.
type connCancelKey struct{}

// closableConnContext returns ctx, the context quic-go derives a new
// connection's context from, made cancelable by quicConns: see
// connActivity.closeDrained.
func closableConnContext(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	return context.WithValue(ctx, connCancelKey{}, cancel)
}

// add records c until its context ends (the connection closed) and returns
// its activity record.
func (q *quicConns) add(c *quic.Conn) *connActivity {
	a := &connActivity{q: q, conn: c, idleAfter: q.idleAfter, grace: goAwayGrace, start: time.Now()}
	a.cancel, _ = c.Context().Value(connCancelKey{}).(context.CancelFunc)
	if a.idleAfter <= 0 {
		a.idleAfter = drainIdleAfter
	}
	if q.idleTimeout > 0 && q.idleTimeout < a.grace {
		a.grace = q.idleTimeout
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
// connections during Shutdown, and those whose client went silent after
// its requests (see goAwayGrace).
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

// handlerStarted records that a handler runs on the connection; until
// handlerDone, the drain timer leaves the connection alone.
func (a *connActivity) handlerStarted() {
	a.active.Add(1)
	if !a.used.Load() {
		a.used.Store(true)
	}
}

// handlerDone records that a handler returned. During Shutdown, the last
// one to return starts the grace period.
func (a *connActivity) handlerDone() {
	if a.active.Add(-1) == 0 && a.draining.Load() {
		a.mu.Lock()
		if a.active.Load() == 0 {
			a.armLocked(a.grace)
		}
		a.mu.Unlock()
	}
}

// startDrain arms the drain timer: an unused connection is looked at once
// it is drainIdleAfter old (at once if older), a used one with no handler
// running after goAwayGrace; one with a handler running is armed by
// handlerDone.
func (a *connActivity) startDrain() {
	a.mu.Lock()
	a.draining.Store(true)
	switch {
	case !a.used.Load():
		a.armLocked(time.Until(a.start.Add(a.idleAfter)))
	case a.active.Load() == 0:
		a.armLocked(a.grace)
	}
	a.mu.Unlock()
}

// armLocked starts the drain timer to fire after d, unless one is armed or
// the connection has ended. a.mu is held.
func (a *connActivity) armLocked(d time.Duration) {
	if a.closed || a.timer != nil {
		return
	}
	a.packets = a.conn.ConnectionStats().PacketsReceived
	a.timer = time.AfterFunc(d, a.check)
}

// check is the drain timer. It closes the connection when no handler runs
// and either none ever ran (the allowance has passed) or the client has
// sent no packet since the timer was armed; a client still sending gets
// another goAwayGrace.
func (a *connActivity) check() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.timer = nil
	if a.active.Load() > 0 { // handlerDone arms it again
		a.mu.Unlock()
		return
	}
	if a.used.Load() && a.conn.ConnectionStats().PacketsReceived != a.packets {
		a.armLocked(a.grace)
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.mu.Unlock()
	a.closeDrained()
}

// closeDrained closes a connection Shutdown no longer waits for. Its
// context is cancelled before it is closed: quic-go's per-connection loop,
// once its server shuts down gracefully, takes a closed stream queue with
// the connection's context still live for a reason to send GOAWAY again,
// and starts a goroutine to write it on every pass until the context ends.
// A connection closed in that window spins; hundreds closed together had
// spawned 10^4 to 10^5 goroutines. With the context ended first, the loop
// sees a closed connection and exits.
// The CONNECTION_CLOSE is written after this returns; see closeSettle.
func (a *connActivity) closeDrained() {
	if a.cancel != nil {
		a.cancel()
	}
	a.close()
	a.q.lastDrained.Store(time.Now().UnixNano())
}

// settle waits until closeSettle has passed since the last closeDrained,
// if one ran: Shutdown calls it before closing the UDP socket.
func (q *quicConns) settle() {
	if last := q.lastDrained.Load(); last != 0 {
		if d := time.Until(time.Unix(0, last).Add(closeSettle)); d > 0 {
			time.Sleep(d)
		}
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
		a.timer = nil
	}
	a.mu.Unlock()
}
