package h2conn

import (
	"context"
	"sync/atomic"
	"time"
)

// Telling the pool that a stream became free. A pool that makes requests
// wait for a stream (ferry's, with MaxConnsPerHost) needs to hear of every
// slot released, but only once x/net agrees the stream is free: x/net keeps
// counting a stream we released until it has forgotten it (a request body
// still uploading after the response ended, a reset stream awaiting its
// PING acknowledgement, cleanup on x/net's own goroutine). A release that
// x/net does not yet see starts a watcher that waits, with short growing
// sleeps, until x/net has room or the connection dies, and then tells the
// pool. x/net offers no notification for that moment; the watcher runs only
// in that case, only with a hook set, and at most one per connection.

// Until the server's SETTINGS arrive x/net assumes 100 concurrent streams,
// and a reservation taken then still counts after SETTINGS lower the limit.
// In wrapped mode (Go 1.27+) that deadlocks: net/http's writer that holds
// the new-stream lock waits for the count of streams and reservations to
// drop below the limit, while the reservations belong to requests queued
// behind that same lock. So with a hook set only one slot is handed out
// until the SETTINGS are known to have arrived. ClientConnState cannot
// tell (legacy mode reports MaxConcurrentStreams 0 before SETTINGS, wrapped
// mode reports the assumed 100), so the proof is one that holds in both
// modes: a frame the server sent after its SETTINGS, that is the ack of a
// PING sent when the hook is set, or a response to any request. Frames are
// processed in order by x/net's single reader.

// streamFreeHook holds the OnStreamFree callback and the lag watcher state.
type streamFreeHook struct {
	fn       atomic.Pointer[func()]
	settled  atomic.Bool   // a frame sent after the server's SETTINGS was processed
	pinging  atomic.Bool   // the SETTINGS probe (awaitPeerSettings) was started
	watching atomic.Bool   // a lag watcher goroutine is running
	lagged   atomic.Uint64 // releases that found x/net still full
}

// lagPollMin and lagPollMax bound the watcher's sleeps between checks.
const (
	lagPollMin = 50 * time.Microsecond
	lagPollMax = 5 * time.Millisecond
)

// OnStreamFree sets fn to be called, outside any lock of the connection,
// each time a slot is released and x/net has room for a new stream, and
// when the connection stops taking streams (so that waiters look again and
// find it unusable). fn must not block. A nil fn removes the hook; without
// one nothing is done on release. Set it before the connection is shared.
// Setting it sends one PING (its ack proves the server's SETTINGS arrived;
// until then no second slot is handed out).
func (c *Conn) OnStreamFree(fn func()) {
	if fn == nil {
		c.free.fn.Store(nil)
		return
	}
	c.free.fn.Store(&fn)
	if !c.free.settled.Load() && c.free.pinging.CompareAndSwap(false, true) {
		go c.awaitPeerSettings()
	}
}

// awaitPeerSettings pings the server: the ack comes after the server's
// SETTINGS, so the peer's stream limit is known from then on. It ends when
// the ack arrives or the connection fails or closes, and then tells the
// hook so that waiters look again (and take a stream, or find the
// connection unusable).
func (c *Conn) awaitPeerSettings() {
	if err := c.cc.Ping(context.Background()); err == nil {
		c.free.settled.Store(true)
	}
	if fn := c.free.fn.Load(); fn != nil {
		(*fn)()
	}
}

// peerFrameSeen records that a frame the server sent after its SETTINGS
// (a response) was processed.
func (c *Conn) peerFrameSeen() {
	if !c.free.settled.Load() {
		c.free.settled.Store(true)
	}
}

// streamFreed runs after a slot was released.
func (c *Conn) streamFreed() {
	fn := c.free.fn.Load()
	if fn == nil {
		return
	}
	if c.isDead() || c.roomForStream() {
		(*fn)()
		return
	}
	c.watchLater()
}

// watchLater makes the lag watcher call the hook once x/net has room.
func (c *Conn) watchLater() {
	c.free.lagged.Add(1)
	if c.free.watching.CompareAndSwap(false, true) {
		go c.watchLag()
	}
}

// peerLimitKnown reports whether a second stream may be reserved: always
// without a hook; with one, only once the server's SETTINGS (and so its
// SETTINGS_MAX_CONCURRENT_STREAMS) are known to have arrived.
func (c *Conn) peerLimitKnown() bool {
	return c.free.fn.Load() == nil || c.free.settled.Load()
}

// roomForStream reports whether x/net would take a new stream now.
func (c *Conn) roomForStream() bool {
	return c.peerLimitKnown() && c.cc.CanTakeNewRequest()
}

// deathFreed tells the hook that the connection will take no more streams.
// It does not call into x/net (x/net may hold its own locks when it reports
// a death).
func (c *Conn) deathFreed() {
	if fn := c.free.fn.Load(); fn != nil {
		(*fn)()
	}
}

// watchLag waits until x/net has room for a stream (or the connection is
// dead), calls the hook, and goes on while releases arrived meanwhile.
func (c *Conn) watchLag() {
	for {
		seen := c.free.lagged.Load()
		pause := lagPollMin
		for !c.isDead() && !c.roomForStream() {
			time.Sleep(pause)
			pause = min(2*pause, lagPollMax)
		}
		if fn := c.free.fn.Load(); fn != nil {
			(*fn)()
		}
		c.free.watching.Store(false)
		if c.free.lagged.Load() == seen || !c.free.watching.CompareAndSwap(false, true) {
			return
		}
	}
}

func (c *Conn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}
