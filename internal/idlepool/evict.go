package idlepool

// evictOldest closes the oldest idle connections, whatever their key, until
// the pool is back within MaxIdle. It runs only after a put went over the
// cap. It reads every shard's watermark without locking (a lower bound on
// that shard's oldest), locks the shard with the lowest, and recomputes its
// true oldest; if that is still no later than every other shard's lower
// bound it is the global oldest and is evicted, otherwise the corrected
// watermark is kept and the choice is made again. Cost: one atomic load per
// shard plus a scan of one shard's keys holding idle conns, per eviction.
func (p *Pool[K, C]) evictOldest() {
	var evicted []C
	for p.idleTotal.Load() > int64(p.maxIdle) {
		best, bestWM, second := -1, int64(noIdle), int64(noIdle)
		for i := range p.shards {
			wm := p.shards[i].watermark.Load()
			switch {
			case wm < bestWM:
				second = bestWM
				best, bestWM = i, wm
			case wm < second:
				second = wm
			}
		}
		if best < 0 {
			break // everything idle was taken meanwhile
		}
		s := &p.shards[best]
		s.mu.Lock()
		oldest, ks := s.oldestLocked()
		if ks == nil || oldest > second {
			s.mu.Unlock()
			continue // stale lower bound, now corrected; choose again
		}
		evicted = s.removeOldestLocked(ks, 1, evicted)
		p.releaseSlotLocked(s, ks)
		if len(s.idleKeys) > 0 {
			s.oldestLocked()
		}
		s.mu.Unlock()
		p.idleTotal.Add(-1)
		p.counters.evictions.Add(1)
	}
	p.closeAsync(evicted)
}
