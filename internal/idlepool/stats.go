package idlepool

import "sync/atomic"

// counters are the pool-wide event counts; per-shard hits and misses are
// kept in the shards so the request path writes no shared cache line.
type counters struct {
	evictions      atomic.Uint64
	expirations    atomic.Uint64
	rejected       atomic.Uint64
	waits          atomic.Uint64
	cancelledWaits atomic.Uint64
	sharedHits     atomic.Uint64
	sharedMisses   atomic.Uint64
	sharedDropped  atomic.Uint64
	sharedExpired  atomic.Uint64
	sweeps         atomic.Uint64
}

// Stats is a snapshot of the pool's state and event counts since New. The
// counts are read one by one without stopping the pool, so under load they
// need not add up exactly.
type Stats struct {
	Idle   int // idle exclusive connections now
	Shared int // shared connections now

	Hits           uint64 // Acquire or TryGet returned an idle connection
	Misses         uint64 // Acquire or TryGet found none idle
	Evictions      uint64 // idle connections closed to stay within MaxIdle
	Expirations    uint64 // idle exclusive connections closed after IdleTimeout
	Rejected       uint64 // Puts closed because the pool keeps no more idle
	Waits          uint64 // Acquire calls that had to wait for a slot
	CancelledWaits uint64 // of those, the ones whose context ended first
	SharedHits     uint64 // GetShared reserved a stream
	SharedMisses   uint64 // GetShared found nothing with capacity
	SharedDropped  uint64 // shared connections dropped as no longer Usable
	SharedExpired  uint64 // shared connections closed after IdleTimeout
	Sweeps         uint64 // shard sweeps run because a watermark fell due
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool[K, C]) Stats() Stats {
	var st Stats
	for i := range p.shards {
		s := &p.shards[i]
		st.Idle += int(s.idleCount.Load())
		st.Shared += int(s.sharedCount.Load())
		st.Hits += s.hits.Load()
		st.Misses += s.misses.Load()
	}
	c := &p.counters
	st.Evictions = c.evictions.Load()
	st.Expirations = c.expirations.Load()
	st.Rejected = c.rejected.Load()
	st.Waits = c.waits.Load()
	st.CancelledWaits = c.cancelledWaits.Load()
	st.SharedHits = c.sharedHits.Load()
	st.SharedMisses = c.sharedMisses.Load()
	st.SharedDropped = c.sharedDropped.Load()
	st.SharedExpired = c.sharedExpired.Load()
	st.Sweeps = c.sweeps.Load()
	return st
}

// IdleLen returns how many idle exclusive connections key has now.
func (p *Pool[K, C]) IdleLen(key K) int {
	s, h := p.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.lookupLocked(h, key); ks != nil {
		return int(ks.nidle)
	}
	return 0
}

// ConnsLen returns how many slots of key are held (connections being
// dialled, in use, idle or shared).
func (p *Pool[K, C]) ConnsLen(key K) int {
	s, h := p.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.lookupLocked(h, key); ks != nil {
		return int(ks.conns)
	}
	return 0
}

// IdleTotal returns how many idle exclusive connections the pool holds now,
// over all keys: one atomic load per shard, no lock (Stats' Idle without the
// other counters).
func (p *Pool[K, C]) IdleTotal() int {
	n := 0
	for i := range p.shards {
		n += int(p.shards[i].idleCount.Load())
	}
	return n
}
