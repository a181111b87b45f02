package idlepool

import (
	"sync/atomic"
	"time"
)

// shardLock is the mutual exclusion lock of a shard. It behaves like
// sync.Mutex (an uncontended Lock is one compare-and-swap; a released lock
// may be taken by an arriving goroutine before a woken waiter; one woken
// waiter at a time; a waiter that lost the lock after a wake-up sleeps again
// ahead of the waiters that never woke; a waiter that has waited longer than
// lockStarveAfter switches the lock to hand-off mode, where each Unlock
// passes it to the first sleeper in line) except in how a goroutine that
// finds it held waits: it polls briefly without PAUSE, and not at all when
// others already wait, then sleeps.
//
// Why: the pool's critical sections are tens of nanoseconds, and when many
// requests use one key they all take one shard's lock. sync.Mutex spins up
// to four rounds of 30 PAUSE instructions (about 140 cycles each on this
// machine's Xeon) before it sleeps, and then the waiters and the holder take
// turns with the shard's cache lines: a get + put by two or four goroutines
// on one key measured 1.6-2.1x one goroutine's (BenchmarkPool keys_1,
// parallel-2 and -4 against serial). With waiters asleep the holder runs its
// next operations on warm lines, and a sleeping waiter leaves its core to
// other goroutines.
//
// The zero shardLock is not usable: init creates its wake channel.
type shardLock struct {
	// state is lockHeld, lockWoken and lockStarving, plus the number of
	// waiters asleep on requeued times lockRequeued, plus the number of all
	// sleeping waiters (on either channel) times lockSleeper.
	state atomic.Int64
	// wake and requeued carry wake-ups to sleeping waiters: a waiter's first
	// sleep is on wake, every later one on requeued, and an Unlock wakes a
	// sleeper of requeued when there is one. So a waiter that was woken and
	// lost the lock again (to an arriving goroutine) is next in line instead
	// of behind every waiter that came after it, and the hand-off that its
	// long wait started goes to it. Two channels because a channel's
	// receivers are served in arrival order only.
	//
	// At most one wake-up is in flight at a time over both (in normal mode
	// lockWoken is set from the send until the woken waiter acts; in
	// hand-off mode the lock stays handed over until the receiver has it),
	// so a send on either one-slot buffer never blocks.
	wake     chan struct{}
	requeued chan struct{}
}

const (
	lockHeld     = 1 << iota // a goroutine holds the lock
	lockWoken                // a sleeper was woken and has not yet retried
	lockStarving             // hand-off mode (see shardLock)

	// lockRequeued is the unit of the count of sleepers on requeued, in
	// bits 3-31; lockSleeper the unit of the count of all sleepers, from
	// bit 32 (so neither count can overflow into the other).
	lockRequeued = 1 << 3
	lockSleeper  = 1 << 32

	requeuedMask = lockSleeper - lockRequeued
)

// lockStarveAfter is how long (in nanoseconds) a waiter may wait before it
// switches the lock to hand-off mode; sync.Mutex uses the same 1ms. Tests
// lower it to exercise hand-off mode.
var lockStarveAfter atomic.Int64

func init() { lockStarveAfter.Store(int64(time.Millisecond)) }

func (l *shardLock) init() {
	l.wake = make(chan struct{}, 1)
	l.requeued = make(chan struct{}, 1)
}

// Lock locks l, sleeping until it is available.
func (l *shardLock) Lock() {
	if l.state.CompareAndSwap(0, lockHeld) {
		return
	}
	l.lockSlow()
}

// A goroutine that finds the lock held polls it lockSpins times,
// lockSpinDelay empty loop turns apart (no PAUSE instruction), before it
// sleeps, unless others already wait for it: two requests that meet on a
// shard by chance then often avoid a sleep and a wake-up, while on a lock
// that several goroutines want all the time the newcomers sleep at once.
// The count is a trade measured with BenchmarkPool (-cpu 2, parallel):
// 16 polls brought keys_10000 back to sync.Mutex's ~130 ns per get + put
// but let two goroutines on one key fall back into taking turns at every
// operation (keys_1 164-221 ns, from ~150 with 8 polls or none); with 8
// polls keys_10000 measured 168-191 ns, with none ~197.
const (
	lockSpins     = 8
	lockSpinDelay = 30
)

func (l *shardLock) lockSlow() {
	for range lockSpins {
		for j := 0; j < lockSpinDelay; j++ {
		}
		old := l.state.Load()
		if old >= lockSleeper || old&(lockWoken|lockStarving) != 0 {
			break // others wait already: sleep
		}
		if old&lockHeld == 0 && l.state.CompareAndSwap(old, old|lockHeld) {
			return
		}
	}
	var since time.Time // when this goroutine first went to sleep
	awoke := false      // woken in normal mode: lockWoken is ours to clear
	starving := false   // waited longer than lockStarveAfter
	for {
		old := l.state.Load()
		if old&(lockHeld|lockStarving) == 0 {
			// Free and in normal mode: take it.
			new := old | lockHeld
			if awoke {
				new &^= lockWoken
			}
			if l.state.CompareAndSwap(old, new) {
				return
			}
			continue
		}
		// Held, or being handed to a sleeper: sleep, ahead of the
		// waiters that never woke if this one slept before.
		requeue := !since.IsZero()
		new := old + lockSleeper
		if requeue {
			new += lockRequeued
		}
		if awoke {
			new &^= lockWoken
		}
		if starving && old&lockHeld != 0 {
			new |= lockStarving
		}
		if !l.state.CompareAndSwap(old, new) {
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		if requeue {
			<-l.requeued
		} else {
			<-l.wake
		}
		starving = starving || int64(time.Since(since)) > lockStarveAfter.Load()
		if cur := l.state.Load(); cur&lockStarving != 0 {
			// Hand-off: the unlocker left the lock to us and counted
			// nothing. Take it, leave the sleepers (and the requeued
			// ones), and end hand-off mode if we did not wait long or
			// nobody else sleeps.
			delta := int64(lockHeld - lockSleeper)
			if requeue {
				delta -= lockRequeued
			}
			if !starving || cur/lockSleeper == 1 {
				delta -= lockStarving
			}
			l.state.Add(delta)
			return
		}
		// Woken in normal mode: the unlocker took us off the counts.
		awoke = true
	}
}

// Unlock unlocks l. Unlocking a lock that is not held is a fatal error, as
// for sync.Mutex.
func (l *shardLock) Unlock() {
	if new := l.state.Add(-lockHeld); new != 0 {
		l.unlockSlow(new)
	}
}

func (l *shardLock) unlockSlow(new int64) {
	if (new+lockHeld)&lockHeld == 0 {
		l.state.Add(lockHeld) // undone, so that a caller that recovers finds the lock as it was
		panic("idlepool: unlock of unlocked shard lock")
	}
	if new&lockStarving != 0 {
		// Hand the lock to the first sleeper, a requeued one if any; it
		// takes itself off the counts.
		if new&requeuedMask != 0 {
			l.requeued <- struct{}{}
		} else {
			l.wake <- struct{}{}
		}
		return
	}
	old := new
	for {
		// Nobody sleeps, or someone holds the lock again (its Unlock will
		// wake), or a woken waiter is about to retry: nothing to do.
		if old < lockSleeper || old&(lockHeld|lockWoken|lockStarving) != 0 {
			return
		}
		if old&requeuedMask != 0 {
			if l.state.CompareAndSwap(old, (old-lockSleeper-lockRequeued)|lockWoken) {
				l.requeued <- struct{}{}
				return
			}
		} else if l.state.CompareAndSwap(old, (old-lockSleeper)|lockWoken) {
			l.wake <- struct{}{}
			return
		}
		old = l.state.Load()
	}
}
