package idlepool

import (
	"reflect"
	"time"
)

// SharedConn is a multiplexed connection (HTTP/2, HTTP/3) that serves many
// requests at once. Its dynamic type must be comparable (a pointer, as a
// rule): the pool finds it again with ==.
type SharedConn interface {
	Conn
	// ReserveStream claims one stream if the connection is healthy and has
	// capacity, reporting whether it did.
	ReserveStream() bool
	// Usable reports false once the connection can never take a new stream
	// (GOAWAY received, closed, broken).
	Usable() bool
}

// IdleReporter is implemented by a SharedConn that the pool should close
// after IdleTimeout without streams. IdleSince reports whether no stream is
// active (idle) and since when, on the clock the pool was configured with.
type IdleReporter interface {
	IdleSince() (since time.Time, idle bool)
}

// IdleCloser may be implemented by an IdleReporter to close itself only if
// it is still idle, atomically with respect to ReserveStream; it reports
// whether it closed. Without it the pool re-checks IdleSince and calls Close,
// which leaves a short window in which a stream reserved by a GetShared that
// raced the expiry is cut.
type IdleCloser interface {
	CloseIfIdle() bool
}

// AddShared makes s available to GetShared for key. The slot the caller
// reserved with Acquire moves to s; if the key holds no slot at all, s takes
// one. Waiters of key are woken with ErrSharedAvailable. A nil s is ignored;
// an s whose dynamic type is not comparable, or one added after Close, is
// closed and its slot released.
func (p *Pool[K, C]) AddShared(key K, s SharedConn) {
	if s == nil {
		return
	}
	comparable := reflect.TypeOf(s).Comparable()
	sh, h := p.locate(key)
	sh.mu.Lock()
	if p.closed.Load() || !comparable {
		if ks := sh.lookupLocked(h, key); ks != nil {
			p.releaseSlotLocked(sh, ks)
		}
		sh.mu.Unlock()
		s.Close()
		return
	}
	ks := sh.getOrCreateLocked(h, key)
	if ks.conns == 0 {
		ks.conns = 1
	}
	sh.addSharedLocked(ks, s)
	ks.streamGen++
	for ks.waiters.hand(waitResult[C]{err: ErrSharedAvailable}) {
	}
	sh.mu.Unlock()
	if _, ok := s.(IdleReporter); ok {
		p.sharedSeen.Store(true)
		if t := p.timeout.Load(); t > 0 && !p.expiry.armed.Load() {
			p.expiry.arm(p, p.now()+t)
		}
	}
}

// Turn is one request's state across GetSharedTurn and AcquireTurn calls
// (see AcquireTurn). The zero Turn is a request that has not looked yet; a
// Turn belongs to one request and one key and is not safe for concurrent
// use.
type Turn struct {
	gen    uint64 // keyState.streamGen seen by the last GetSharedTurn
	seq    uint64 // place in the wait queue once the request waited; 0: never
	looked bool   // gen is set
}

// GetShared returns the first usable shared connection of key on which it
// could reserve a stream. Connections found no longer Usable are dropped
// from the pool (not closed: they may be finishing streams) and their slots
// released. The connection methods run outside any lock.
func (p *Pool[K, C]) GetShared(key K) (SharedConn, bool) {
	return p.GetSharedTurn(key, nil)
}

// GetSharedTurn is GetShared that also records in t (when not nil) which
// stream releases of key it has seen, for the AcquireTurn that follows a
// miss.
func (p *Pool[K, C]) GetSharedTurn(key K, t *Turn) (SharedConn, bool) {
	return p.GetSharedTurnHashed(key, p.Hash(key), t)
}

// GetSharedTurnHashed is GetSharedTurn with key's hash already computed by
// Hash (see KeyHash).
func (p *Pool[K, C]) GetSharedTurnHashed(key K, kh KeyHash, t *Turn) (SharedConn, bool) {
	h := uint64(kh)
	sh := &p.shards[h&(numShards-1)]
	sh.mu.Lock()
	var list []SharedConn
	ks := sh.lookupLocked(h, key)
	if ks != nil {
		list = ks.shared // copy-on-write: safe to read after unlocking
	}
	if t != nil {
		t.looked = true
		t.gen = 0
		if ks != nil {
			t.gen = ks.streamGen
		}
	}
	sh.mu.Unlock()
	for _, s := range list {
		// ReserveStream first: it refuses a connection that is not
		// healthy, so Usable (which costs h2conn a lock of its own) is
		// asked only to tell an unusable connection, to drop, from a
		// full one.
		if s.ReserveStream() {
			p.counters.sharedHits.Add(1)
			return s, true
		}
		if !s.Usable() {
			if p.removeShared(key, s, true) {
				p.counters.sharedDropped.Add(1)
			}
		}
	}
	p.counters.sharedMisses.Add(1)
	return nil, false
}

// StreamReleased tells the pool that a shared connection of key may have
// a free stream again (a stream ended or a reservation was given back): the
// longest-waiting Acquire of key, if any, returns ErrSharedAvailable, and a
// request between GetSharedTurn and AcquireTurn looks again instead of
// waiting. The owner of a shared connection calls it for every released
// stream, outside its own locks; a caller that is woken and finds no stream
// (another request took it) waits again in its old place. Without
// MaxConnsPerKey nobody waits and it does nothing.
func (p *Pool[K, C]) StreamReleased(key K) {
	if p.maxConns <= 0 {
		return
	}
	p.wakeForStream(key)
}

// wakeForStream hands ErrSharedAvailable to the first waiter of key and
// marks that a stream may be free.
func (p *Pool[K, C]) wakeForStream(key K) {
	sh, h := p.locate(key)
	sh.mu.Lock()
	if ks := sh.lookupLocked(h, key); ks != nil {
		ks.streamGen++
		ks.waiters.hand(waitResult[C]{err: ErrSharedAvailable})
	}
	sh.mu.Unlock()
}

// RemoveShared forgets s, a shared connection of key the caller saw die,
// and releases its slot. The pool does not close it. Removing a connection
// that is not pooled does nothing.
func (p *Pool[K, C]) RemoveShared(key K, s SharedConn) {
	if s == nil || !reflect.TypeOf(s).Comparable() {
		return
	}
	p.removeShared(key, s, true)
}

// removeShared takes s out of key's list, releasing its slot when release is
// set; it reports whether s was there.
func (p *Pool[K, C]) removeShared(key K, s SharedConn, release bool) bool {
	sh, h := p.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ks := sh.lookupLocked(h, key)
	if ks == nil || !sh.removeSharedLocked(ks, s) {
		return false
	}
	if release {
		p.releaseSlotLocked(sh, ks)
	}
	return true
}

func (sh *shard[K, C]) addSharedLocked(ks *keyState[K, C], s SharedConn) {
	next := make([]SharedConn, len(ks.shared), len(ks.shared)+1)
	copy(next, ks.shared)
	ks.shared = append(next, s)
	if len(ks.shared) == 1 {
		ks.sharedIdx = len(sh.sharedKeys)
		sh.sharedKeys = append(sh.sharedKeys, ks)
	}
	addLocked(&sh.sharedCount, 1)
}

func (sh *shard[K, C]) removeSharedLocked(ks *keyState[K, C], s SharedConn) bool {
	i := -1
	for j, x := range ks.shared {
		if x == s {
			i = j
			break
		}
	}
	if i < 0 {
		return false
	}
	if len(ks.shared) == 1 {
		ks.shared = nil
		last := len(sh.sharedKeys) - 1
		if ks.sharedIdx != last {
			moved := sh.sharedKeys[last]
			sh.sharedKeys[ks.sharedIdx] = moved
			moved.sharedIdx = ks.sharedIdx
		}
		sh.sharedKeys[last] = nil
		sh.sharedKeys = sh.sharedKeys[:last]
		ks.sharedIdx = -1
	} else {
		next := make([]SharedConn, 0, len(ks.shared)-1)
		next = append(next, ks.shared[:i]...)
		ks.shared = append(next, ks.shared[i+1:]...)
	}
	addLocked(&sh.sharedCount, -1)
	return true
}

// sharedRef is a shared connection seen by a sweep, with its key.
type sharedRef[K comparable] struct {
	key K
	s   SharedConn
}

// sweepShared closes shared connections idle for timeout or longer and
// returns the next pool-clock time at which one may expire: an idle one at
// its deadline, a busy one no earlier than a full timeout from now.
func (p *Pool[K, C]) sweepShared(now, timeout int64) int64 {
	var refs []sharedRef[K]
	for i := range p.shards {
		sh := &p.shards[i]
		if sh.sharedCount.Load() == 0 {
			continue
		}
		sh.mu.Lock()
		for _, ks := range sh.sharedKeys {
			for _, s := range ks.shared {
				refs = append(refs, sharedRef[K]{key: ks.key, s: s})
			}
		}
		sh.mu.Unlock()
	}
	next := int64(noIdle)
	wall := p.clock()
	for _, r := range refs {
		ir, ok := r.s.(IdleReporter)
		if !ok {
			continue
		}
		since, idle := ir.IdleSince()
		if !idle {
			next = min(next, now+timeout)
			continue
		}
		idleFor := int64(wall.Sub(since))
		if idleFor < timeout {
			next = min(next, now+timeout-idleFor)
			continue
		}
		if !p.removeShared(r.key, r.s, false) {
			continue // removed by someone else meanwhile
		}
		if p.closeSharedIfIdle(r.s, ir, timeout) {
			p.counters.sharedExpired.Add(1)
			p.releaseSharedSlot(r.key)
			continue
		}
		// A stream was reserved as it expired: keep it.
		p.readdShared(r.key, r.s)
		next = min(next, now+timeout)
	}
	return next
}

// closeSharedIfIdle closes s if it is still idle past timeout (it is no
// longer in the pool, so no new GetShared finds it).
func (p *Pool[K, C]) closeSharedIfIdle(s SharedConn, ir IdleReporter, timeout int64) bool {
	if ic, ok := s.(IdleCloser); ok {
		return ic.CloseIfIdle()
	}
	since, idle := ir.IdleSince()
	if !idle || int64(p.clock().Sub(since)) < timeout {
		return false
	}
	s.Close()
	return true
}

func (p *Pool[K, C]) releaseSharedSlot(key K) {
	p.Release(key)
}

// readdShared puts back a shared connection the sweep took out, keeping its
// slot; after Close it is closed instead.
func (p *Pool[K, C]) readdShared(key K, s SharedConn) {
	sh, h := p.locate(key)
	sh.mu.Lock()
	if p.closed.Load() {
		if ks := sh.lookupLocked(h, key); ks != nil {
			p.releaseSlotLocked(sh, ks)
		}
		sh.mu.Unlock()
		s.Close()
		return
	}
	sh.addSharedLocked(sh.getOrCreateLocked(h, key), s)
	sh.mu.Unlock()
}
