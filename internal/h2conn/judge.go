package h2conn

import (
	"context"
	"sync/atomic"
	"time"
)

// Judging a connection x/net refuses a stream on.
//
// x/net answers "no" to a new stream both for a connection that is done for
// (GOAWAY, closed, closing, single use spent) and for one that is only full;
// ClientConnState tells them apart, but in legacy mode it takes x/net's
// write lock (stateTakesWriteLock), which a write to a peer that does not
// read holds for as long as it is stuck: a request must never wait for it.
// So a refusal is judged in two steps:
//
//   - at once, on the caller's goroutine, from what ferry itself knows:
//     the connection marked dead (x/net reports GOAWAY and close through
//     MarkDead, watch.go), its one request of a single-use connection
//     started, a request asking to close the connection started (x/net
//     then takes no new stream), or an RST_STREAM(PROTOCOL_ERROR) from the
//     server seen by RoundTrip or a response body's Read (peerProtocolReset:
//     x/net then sets doNotReuse and says so to no one). In wrapped mode,
//     whose State takes no write lock, State is asked at once as well;
//   - otherwise the connection is taken as alive and full, and a checker
//     goroutine (one per connection at a time) asks State; a connection
//     that turns out closing or closed is marked dead and closed once idle,
//     and the pool is told (the OnStreamFree hook) so that its waiters look
//     again. The checker waits for State at most PingTimeout (stateWithin);
//     a State call still stuck behind the write lock goes on alone, on a
//     goroutine of its own, until the write ends or the connection closes.
//
// A connection that stays full although ferry has no stream in use on it
// is full of streams ferry has released and x/net still counts: a stream
// reset by a cancelled request counts until the server acknowledges the
// PING x/net sent with the reset, and a server that never answers it
// leaves the connection full for good (legacy x/net, golang/go's
// pendingResets). When a request looking for a stream finds a connection
// so (ReserveStream refused with no stream of ours in use), the checker
// sends a PING of its own, bounded by HTTP2Config.PingTimeout (15 s by
// default): its acknowledgement clears x/net's pending resets (and the
// hook wakes the waiters), while a server that leaves it unanswered is
// unresponsive and the connection is marked dead and closed, as x/net's
// health check closes a connection whose PING goes unanswered. So is one
// whose State has not answered within PingTimeout (a write stuck for that
// long, such as the cancelled request's RST_STREAM+PING to a server that
// stopped reading): the PING could not even be written. net/http
// (without MaxConnsPerHost's wait, see the transport) leaves such a
// connection in its pool and dials another; marking it dead at once
// instead would also cost the healthy connections whose resets are
// acknowledged a round trip later, so ferry asks the server first.

// defaultPingTimeout is net/http's default HTTP2Config.PingTimeout.
const defaultPingTimeout = 15 * time.Second

// judgeState is the checker goroutine's state.
type judgeState struct {
	asked   atomic.Uint64 // checks asked for
	running atomic.Bool   // a checker goroutine runs
	// pingIdle: a request found the connection full with no stream of
	// ours in use since the checker last pinged.
	pingIdle atomic.Bool
	// stateAnswer: the answer of a State call that has not yet come back
	// (stateWithin), nil when none is outstanding. Used only by the checker
	// goroutine; running's compare-and-swap orders one checker after the
	// previous one.
	stateAnswer chan bool
}

// knownUnusable reports, without asking x/net, whether ferry knows the
// connection takes no new stream: marked dead, its single-use request or a
// request asking to close the connection started.
func (c *Conn) knownUnusable() bool {
	if c.o != nil {
		return !c.o.usable()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead || c.lastRound
}

// unusableNow judges a connection x/net refused a stream on without
// blocking on x/net's write lock: true when it is known to be unusable;
// false when it is taken as full (legacy mode then has it checked on a
// goroutine of its own).
func (c *Conn) unusableNow() bool {
	if c.knownUnusable() {
		return true
	}
	if !stateTakesWriteLock {
		return c.confirmUnusable()
	}
	c.checkLater(false)
	return false
}

// checkLater has the checker goroutine judge the connection; pingIdle asks
// it, if the connection is full while no stream of ours is in use, to ping
// the server (see above).
func (c *Conn) checkLater(pingIdle bool) {
	if pingIdle {
		c.judge.pingIdle.Store(true)
	}
	c.judge.asked.Add(1)
	if c.judge.running.CompareAndSwap(false, true) {
		go c.runChecks()
	}
}

// runChecks checks the connection and goes on while checks were asked for
// meanwhile.
func (c *Conn) runChecks() {
	for {
		seen := c.judge.asked.Load()
		c.checkOnce()
		c.judge.running.Store(false)
		if c.judge.asked.Load() == seen || !c.judge.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// checkOnce marks the connection dead if x/net says it is unusable, and
// pings a connection that is full with none of our streams in use if a
// request asked for that.
func (c *Conn) checkOnce() {
	if c.isDead() {
		return
	}
	unusable, answered := c.stateWithin(c.pingTimeout)
	if unusable {
		c.die()
		return
	}
	if !c.judge.pingIdle.Swap(false) || !c.idleAndFull() {
		return
	}
	if !answered {
		// x/net's write lock has been held for PingTimeout: our PING could
		// not even be written, let alone acknowledged in time.
		c.die()
		return
	}
	if c.testHookPingIdle != nil {
		c.testHookPingIdle()
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.pingTimeout)
	err := c.cc.Ping(ctx)
	cancel()
	if err != nil {
		c.die()
		return
	}
	// Acknowledged: x/net no longer counts the resets; waiters look again.
	if fn := c.free.fn.Load(); fn != nil && c.roomForStream() {
		(*fn)()
	}
}

// idleAndFull reports whether no slot of ours is in use while x/net takes no
// new stream.
func (c *Conn) idleAndFull() bool {
	c.mu.Lock()
	idle := c.busy == 0
	c.mu.Unlock()
	return idle && !c.cc.CanTakeNewRequest()
}

// die marks the connection dead, closes it if no slot is in use, and tells
// the OnStreamFree hook so that waiters look again.
func (c *Conn) die() {
	if c.markDead() {
		c.closeNow()
	}
	c.deathFreed()
}

// stateWithin asks x/net's State (confirmUnusable) and waits at most d.
// Legacy State waits for x/net's write lock, which a write stuck on a peer
// that does not read holds, so it is asked on a goroutine of its own;
// answered is false when d passed first. That goroutine ends when the write
// does or the connection is closed (closing the net.Conn fails the write);
// until then the next check waits for the same answer instead of starting
// another, so a connection has at most one.
func (c *Conn) stateWithin(d time.Duration) (unusable, answered bool) {
	if !stateTakesWriteLock {
		return c.confirmUnusable(), true
	}
	if c.judge.stateAnswer == nil {
		answer := make(chan bool, 1)
		c.judge.stateAnswer = answer
		go func() { answer <- c.confirmUnusable() }()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case u := <-c.judge.stateAnswer:
		c.judge.stateAnswer = nil
		return u, true
	case <-t.C:
		return false, false
	}
}
