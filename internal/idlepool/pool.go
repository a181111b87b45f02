package idlepool

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is an exclusive connection the pool can hold while it is idle. Close
// is called by the pool, never under a lock, for connections it discards.
type Conn interface {
	Close() error
}

// ErrPoolClosed is returned by Acquire once Close has been called, including
// to Acquire calls that were waiting at the time.
var ErrPoolClosed = errors.New("idlepool: pool closed")

// ErrSharedAvailable is returned by an Acquire that was waiting on a full key
// when a shared connection was added for that key (AddShared) or one of its
// streams was released (StreamReleased), and by an AcquireTurn that would
// have waited although a stream may have become free since its
// GetSharedTurn: the caller should try GetShared, and Acquire again if that
// fails. It holds no slot.
var ErrSharedAvailable = errors.New("idlepool: a shared connection became available")

// ErrNilContext is returned by Acquire when it is given a nil context.
var ErrNilContext = errors.New("idlepool: nil context")

// Pool holds idle exclusive connections and shared connections by key. All
// methods are safe for concurrent use. Create it with New; the zero Pool is
// not usable.
type Pool[K comparable, C Conn] struct {
	seed       maphash.Seed
	maxPerKey  int // < 0: keep nothing idle
	maxIdle    int // 0: no limit; < 0: keep nothing idle
	maxConns   int // <= 0: no limit
	clock      func() time.Time
	fakeClock  bool // Config.Clock was set: read it instead of the monotonic clock
	epoch      time.Time
	timeout    atomic.Int64 // IdleTimeout in ns; <= 0: never expire
	closed     atomic.Bool
	idleTotal  atomic.Int64 // idle entries over all shards; kept only when maxIdle > 0
	expiry     expiryTimer
	closers    sync.WaitGroup // goroutines closing discarded connections
	counters   counters
	shards     []shard[K, C] // numShards of them, allocated apart (see shard)
	sharedSeen atomic.Bool   // a shared connection with IdleSince was ever added
}

// New returns an empty pool configured by cfg (see Config for the meaning of
// zero and negative values).
func New[K comparable, C Conn](cfg Config) *Pool[K, C] {
	p := &Pool[K, C]{
		seed:      maphash.MakeSeed(),
		maxPerKey: cfg.MaxIdlePerKey,
		maxIdle:   cfg.MaxIdle,
		maxConns:  cfg.MaxConnsPerKey,
		clock:     cfg.Clock,
	}
	if p.maxPerKey == 0 {
		p.maxPerKey = DefaultMaxIdlePerKey
	}
	p.fakeClock = p.clock != nil
	if p.clock == nil {
		p.clock = time.Now
	}
	p.epoch = p.clock()
	p.timeout.Store(int64(cfg.IdleTimeout))
	p.expiry.at = noIdle
	p.shards = make([]shard[K, C], numShards)
	for i := range p.shards {
		p.shards[i].init()
	}
	return p
}

// KeyHash is a key's hash under one pool's seed, from Pool.Hash. A request
// that calls the pool several times for one key (GetSharedTurnHashed,
// AcquireTurnHashed, then PutHashed when the connection comes back) hashes
// the key once and passes the KeyHash along; the caller keeps it beside the
// key, for example in its connection. A KeyHash is valid only with the key
// and the pool it was computed for: passing another one files the key under
// the wrong shard. The zero KeyHash is a valid hash value, not "unset".
type KeyHash uint64

// Hash returns key's KeyHash for this pool (the same value every time).
func (p *Pool[K, C]) Hash(key K) KeyHash {
	return KeyHash(maphash.Comparable(p.seed, key))
}

// locate returns the shard of key and the key's hash.
func (p *Pool[K, C]) locate(key K) (*shard[K, C], uint64) {
	h := maphash.Comparable(p.seed, key)
	return &p.shards[h&(numShards-1)], h
}

func (p *Pool[K, C]) shardFor(key K) *shard[K, C] {
	s, _ := p.locate(key)
	return s
}

// now is the pool clock: nanoseconds since New. With the default clock it is
// time.Since, which reads only the monotonic clock (half the cost of
// time.Now, which also reads the wall clock).
func (p *Pool[K, C]) now() int64 {
	if p.fakeClock {
		return int64(p.clock().Sub(p.epoch))
	}
	return int64(time.Since(p.epoch))
}

// keepsIdle reports whether the configuration allows any idle connection.
func (p *Pool[K, C]) keepsIdle() bool {
	return p.maxPerKey > 0 && p.maxIdle >= 0
}

// Acquire is the request path. It returns the most recently used idle
// connection of key (reused is true and idleFor is how long it sat idle), or,
// when none is idle, permission to dial: reused is false, c is the zero value
// and a slot of key is now reserved for the caller, who must later Put the
// connection, hand its slot to AddShared, or Release it.
//
// When the key already has MaxConnsPerKey live connections, Acquire waits, in
// FIFO order with other waiters, until a connection is Put for the key (it is
// handed straight over: reused is true, idleFor is 0), a slot is released
// (permission to dial), a shared connection is added for the key
// (ErrSharedAvailable, no slot held), or ctx is done (ctx.Err()). After Close
// it returns ErrPoolClosed, and ErrNilContext for a nil ctx.
//
// Acquire uses ctx only while it runs: it keeps no reference to it after
// it returns, derives no context from it, and calls ctx.Done only when it
// is about to wait (ctx.Err before that), so a caller may pass a context
// that does work in Done, or recycle it once Acquire has returned.
func (p *Pool[K, C]) Acquire(ctx context.Context, key K) (c C, idleFor time.Duration, reused bool, err error) {
	return p.AcquireTurn(ctx, key, nil)
}

// AcquireTurn is Acquire for a request that also uses shared connections:
// t carries what the request's last GetSharedTurn saw and its place in the
// wait queue. If the key is full and a stream may have become free since
// that GetSharedTurn (AddShared or StreamReleased ran in between),
// AcquireTurn does not wait but returns ErrSharedAvailable at once, so no
// wake-up falls between the two calls. A request that waits again after an
// ErrSharedAvailable keeps its place in line ahead of later arrivals. A nil
// t is Acquire.
func (p *Pool[K, C]) AcquireTurn(ctx context.Context, key K, t *Turn) (c C, idleFor time.Duration, reused bool, err error) {
	return p.AcquireTurnHashed(ctx, key, p.Hash(key), t)
}

// AcquireTurnHashed is AcquireTurn with key's hash already computed by
// Hash (see KeyHash).
func (p *Pool[K, C]) AcquireTurnHashed(ctx context.Context, key K, kh KeyHash, t *Turn) (c C, idleFor time.Duration, reused bool, err error) {
	if ctx == nil {
		return c, 0, false, ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return c, 0, false, err
	}
	// locate and now, written out: the compiler does not inline them into
	// this generic body, and the call costs show on the hot path.
	h := uint64(kh)
	s := &p.shards[h&(numShards-1)]
	var now int64
	if p.fakeClock {
		now = int64(p.clock().Sub(p.epoch))
	} else {
		now = int64(time.Since(p.epoch))
	}
	s.mu.Lock()
	if p.closed.Load() {
		s.mu.Unlock()
		return c, 0, false, ErrPoolClosed
	}
	// The hit path below is written out (sweep check, pop) for the same
	// reason; TryGet uses the same steps through popLocked and sweepIfDueLocked.
	var expired []C
	if t := p.timeout.Load(); t > 0 && now-s.watermark.Load() >= t {
		expired = p.sweepShardLocked(s, now, t, nil)
	}
	ks := s.keys.get(h, key)
	if ks != nil {
		if ks.nidle > 0 {
			var e idleEntry[C]
			if n := ks.ntop - 1; n >= 0 { // popIdle's common case, written out
				e = ks.top[n]
				ks.top[n] = idleEntry[C]{}
				ks.ntop = n
				ks.nidle--
			} else {
				e = ks.popIdle()
			}
			if ks.nidle == 0 {
				s.unlistIdleLocked(ks)
			}
			addLocked(&s.idleCount, -1)
			countLocked(&s.hits)
			s.mu.Unlock()
			if p.maxIdle > 0 {
				p.idleTotal.Add(-1)
			}
			if expired != nil {
				p.closeAsync(expired)
			}
			return e.c, time.Duration(now - e.since), true, nil
		}
	}
	countLocked(&s.misses)
	if ks == nil {
		ks = s.getOrCreateLocked(h, key)
	}
	if p.maxConns <= 0 || int(ks.conns) < p.maxConns {
		ks.conns++
		s.mu.Unlock()
		p.closeAsync(expired)
		return c, 0, false, nil
	}
	if t != nil && t.looked && t.gen != ks.streamGen {
		s.mu.Unlock() // a stream may be free since the caller looked
		p.closeAsync(expired)
		return c, 0, false, ErrSharedAvailable
	}
	w := &waiter[C]{ch: make(chan waitResult[C], 1)}
	if t != nil && t.seq != 0 {
		w.seq = t.seq
	} else {
		ks.nextSeq++
		w.seq = ks.nextSeq
		if t != nil {
			t.seq = w.seq
		}
	}
	ks.pushWaiter(w)
	s.mu.Unlock()
	p.counters.waits.Add(1)
	p.closeAsync(expired)
	return p.wait(ctx, key, w)
}

// wait blocks until w is handed a result or ctx ends.
func (p *Pool[K, C]) wait(ctx context.Context, key K, w *waiter[C]) (c C, idleFor time.Duration, reused bool, err error) {
	select {
	case r := <-w.ch:
		return r.c, 0, r.reused, r.err
	case <-ctx.Done():
	}
	p.giveUp(key, w)
	return c, 0, false, ctx.Err()
}

// giveUp takes a cancelled waiter out of its queue; if it was handed a
// connection or a slot as it gave up, that goes back to the pool.
func (p *Pool[K, C]) giveUp(key K, w *waiter[C]) {
	s, h := p.locate(key)
	s.mu.Lock()
	removed := false
	if ks := s.lookupLocked(h, key); ks != nil {
		removed = ks.waiters.remove(w)
		if removed {
			s.dropIfEmptyLocked(ks)
		}
	}
	s.mu.Unlock()
	p.counters.cancelledWaits.Add(1)
	if removed {
		return
	}
	// Handing happens under the lock into a buffered channel, so the result
	// is there already.
	r := <-w.ch
	if r.err != nil {
		if r.err == ErrSharedAvailable {
			// Woken for a free stream it will not use: pass the wake-up on.
			p.wakeForStream(key)
		}
		return
	}
	if r.reused {
		p.Put(key, r.c)
	} else {
		p.Release(key)
	}
}

// TryGet returns the most recently used idle connection of key and how long
// it sat idle, without waiting and without reserving a slot when there is
// none (ok is false then).
func (p *Pool[K, C]) TryGet(key K) (c C, idleFor time.Duration, ok bool) {
	s, h := p.locate(key)
	now := p.now()
	s.mu.Lock()
	expired := p.sweepIfDueLocked(s, now)
	ks := s.lookupLocked(h, key)
	if ks == nil || ks.nidle == 0 {
		countLocked(&s.misses)
		s.mu.Unlock()
		p.closeAsync(expired)
		return c, 0, false
	}
	e := s.popLocked(ks)
	countLocked(&s.hits)
	s.mu.Unlock()
	p.afterRemove(1)
	p.closeAsync(expired)
	return e.c, time.Duration(now - e.since), true
}

// Put returns an exclusive connection of key, which holds a slot of key, to
// the pool: to the first waiter of key if there is one, else onto the key's
// idle stack as its most recently used connection. When the pool does not
// keep it (MaxIdlePerKey reached or negative, MaxIdle negative, or the pool
// is closed) Put closes it, outside any lock, releases its slot and returns
// false. A Put that takes the pool over MaxIdle closes the oldest idle
// connection of any key instead.
func (p *Pool[K, C]) Put(key K, c C) bool {
	return p.PutHashed(key, p.Hash(key), c)
}

// HandToWaiterHashed gives c to the first Acquire waiting on key (with
// MaxConnsPerKey, in FIFO order), as PutHashed would, and reports whether
// it did. When nobody waits it does nothing: c and its slot stay the
// caller's, to Put, Release or close. kh is key's hash (see KeyHash).
func (p *Pool[K, C]) HandToWaiterHashed(key K, kh KeyHash, c C) bool {
	if p.maxConns <= 0 { // only a full key has waiters
		return false
	}
	h := uint64(kh)
	s := &p.shards[h&(numShards-1)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.closed.Load() {
		return false
	}
	ks := s.keys.get(h, key)
	return ks != nil && ks.waiters.hand(waitResult[C]{c: c, reused: true})
}

// PutHashed is Put with key's hash already computed by Hash (see KeyHash):
// a connection that keeps the KeyHash its request acquired it with does not
// hash its key again when it goes idle.
func (p *Pool[K, C]) PutHashed(key K, kh KeyHash, c C) bool {
	h := uint64(kh) // locate and now, written out as in Acquire
	s := &p.shards[h&(numShards-1)]
	var now int64
	if p.fakeClock {
		now = int64(p.clock().Sub(p.epoch))
	} else {
		now = int64(time.Since(p.epoch))
	}
	s.mu.Lock()
	if p.closed.Load() {
		s.mu.Unlock()
		c.Close()
		return false
	}
	// Sweep before finding the key: the sweep releases the slots of what
	// expired and may drop the key's state from the table, which a Put
	// without a reserved slot (below) must not then push onto.
	var expired []C
	if t := p.timeout.Load(); t > 0 && now-s.watermark.Load() >= t {
		expired = p.sweepShardLocked(s, now, t, nil)
	}
	ks := s.keys.get(h, key)
	if ks == nil {
		ks = s.getOrCreateLocked(h, key)
	}
	if ks.conns == 0 {
		ks.conns = 1 // a connection Put without a reserved slot holds one now
	}
	if p.maxConns > 0 && ks.waiters.hand(waitResult[C]{c: c, reused: true}) {
		s.mu.Unlock() // only a full key has waiters
		p.closeAsync(expired)
		return true
	}
	if !p.keepsIdle() || int(ks.nidle) >= p.maxPerKey {
		p.releaseSlotLocked(s, ks)
		s.mu.Unlock()
		p.counters.rejected.Add(1)
		p.closeAsync(expired)
		c.Close()
		return false
	}
	// now was read before the lock, so another Put may have pushed a newer
	// entry meanwhile. c counts as idle from that entry's time at the
	// latest, so that the stack stays oldest first (a sweep stops at the
	// first entry not due), and it lowers the shard's watermark if it is
	// older than it (into an empty shard, noIdle, it sets it).
	if ks.nidle > 0 {
		now = max(now, ks.newestIdle().since)
	}
	// Push c as the most recently used.
	if n := ks.ntop; int(n) < len(ks.top) { // pushIdle's common case, written out
		ks.top[n] = idleEntry[C]{c: c, since: now}
		ks.ntop = n + 1
		ks.nidle++
	} else {
		ks.pushIdle(idleEntry[C]{c: c, since: now})
	}
	if ks.nidle == 1 {
		ks.idleIdx = int32(len(s.idleKeys))
		s.idleKeys = append(s.idleKeys, ks)
	}
	if now < s.watermark.Load() {
		s.watermark.Store(now)
	}
	addLocked(&s.idleCount, 1)
	s.mu.Unlock()
	if p.maxIdle > 0 && p.idleTotal.Add(1) > int64(p.maxIdle) {
		p.evictOldest()
	}
	if t := p.timeout.Load(); t > 0 && !p.expiry.armed.Load() {
		p.expiry.arm(p, now+t)
	}
	if expired != nil {
		p.closeAsync(expired)
	}
	return true
}

// Release frees the slot of a connection of key that the caller closed, or
// that it failed to dial after Acquire gave it permission; the first waiter
// of key, if any, gets the slot. Connections the pool closes itself (expiry,
// eviction, CloseIdle, a Put it does not keep) have their slot released by the
// pool: do not Release those.
func (p *Pool[K, C]) Release(key K) {
	s, h := p.locate(key)
	s.mu.Lock()
	if ks := s.lookupLocked(h, key); ks != nil {
		p.releaseSlotLocked(s, ks)
	}
	s.mu.Unlock()
}

// releaseSlotLocked frees one slot of ks: the first waiter gets it as
// permission to dial, otherwise the live count drops.
func (p *Pool[K, C]) releaseSlotLocked(s *shard[K, C], ks *keyState[K, C]) {
	if ks.waiters.hand(waitResult[C]{}) {
		return
	}
	if ks.conns > 0 {
		ks.conns--
	}
	s.dropIfEmptyLocked(ks)
}

// afterRemove keeps the global idle count when idle entries left the pool.
func (p *Pool[K, C]) afterRemove(n int) {
	if p.maxIdle > 0 {
		p.idleTotal.Add(int64(-n))
	}
}

// closeAsync closes connections found expired or evicted on a request path on
// a goroutine of their own, so a slow Close delays no request.
func (p *Pool[K, C]) closeAsync(cs []C) {
	if len(cs) == 0 {
		return
	}
	p.closers.Add(1)
	go func() {
		defer p.closers.Done()
		closeAll(cs)
	}()
}

func closeAll[C Conn](cs []C) {
	for _, c := range cs {
		c.Close()
	}
}
