package h2conn

import (
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

// streamFreeHook holds the OnStreamFree callback and the lag watcher state.
type streamFreeHook struct {
	fn       atomic.Pointer[func()]
	watching atomic.Bool  // a lag watcher goroutine is running
	lagged   atomic.Int64 // releases that found x/net still full, not yet told to the hook
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
// Setting it starts the SETTINGS probe (peersettings.go): until the
// server's SETTINGS are known to have arrived no second slot is handed out,
// and fn is called when they are.
func (c *Conn) OnStreamFree(fn func()) {
	if c.o != nil {
		if fn == nil {
			c.o.free.Store(nil)
		} else {
			c.o.free.Store(&fn)
		}
		return
	}
	if fn == nil {
		c.free.fn.Store(nil)
		return
	}
	c.free.fn.Store(&fn)
	c.startProbe()
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

// refusedFull runs when x/net refused a stream on a connection not known
// to be unusable, that is one x/net counts as full. The caller (a pool
// waiter) goes back to waiting, and must be woken once x/net has room.
// x/net may count streams we released and told the hook of already: the
// hook is called once per release as soon as x/net has room for one
// stream, not room for that release's stream, so the releases of several
// streams x/net frees one after the other (a reset awaiting its PING
// acknowledgement, cleanup on x/net's goroutine) can wake more waiters
// than x/net has room for. The waiter refused then is the wakeup of the
// stream x/net frees later, which nobody would otherwise tell the hook of
// (TestStreamFreeRefusedWaiterWoken; transport's
// TestH2WaitersWokenForEveryFreedStream failed about 1 in 100 so: 4
// releases, 4 calls, x/net still counting one stream when the fourth
// waiter asked). So a refusal with a hook set is
// owed a call, through the lag watcher, once x/net has room. On a
// connection full of our own streams this only makes the watcher poll
// until one of them is released (that release wakes a waiter too; the
// extra call makes one more waiter look again).
func (c *Conn) refusedFull() {
	if c.free.fn.Load() == nil || c.knownUnusable() {
		return
	}
	c.watchLater()
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

// watchLag tells the hook of each lagging release once x/net has room for
// a stream (or the connection is dead): one call per release, as when
// x/net keeps up, since the pool wakes one waiter per call. It goes on
// while releases arrive meanwhile.
func (c *Conn) watchLag() {
	for {
		for pending := c.free.lagged.Swap(0); pending > 0; pending-- {
			pause := lagPollMin
			for !c.isDead() && !c.roomForStream() {
				time.Sleep(pause)
				pause = min(2*pause, lagPollMax)
			}
			if fn := c.free.fn.Load(); fn != nil {
				(*fn)()
			}
		}
		c.free.watching.Store(false)
		if c.free.lagged.Load() == 0 || !c.free.watching.CompareAndSwap(false, true) {
			return
		}
	}
}

func (c *Conn) isDead() bool {
	if c.o != nil {
		return !c.o.usable()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}
