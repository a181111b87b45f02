package idlepool

// CloseIdle closes every idle exclusive connection (not the shared ones,
// which may have streams in flight) and releases their slots. The
// connections are closed on the caller's goroutine after every lock is
// released, one shard at a time.
func (p *Pool[K, C]) CloseIdle() {
	for i := range p.shards {
		s := &p.shards[i]
		if s.idleCount.Load() == 0 {
			continue
		}
		var cs []C
		s.mu.Lock()
		for len(s.idleKeys) > 0 {
			ks := s.idleKeys[len(s.idleKeys)-1]
			n := int(ks.nidle)
			cs = s.removeOldestLocked(ks, n, cs) // unlists ks, resets the watermark when last
			for range n {
				p.releaseSlotLocked(s, ks)
			}
		}
		s.mu.Unlock()
		p.afterRemove(len(cs))
		closeAll(cs)
	}
}

// Close closes every pooled connection, idle and shared, stops the timer and
// wakes every waiting Acquire with ErrPoolClosed. Later Acquire calls fail
// with ErrPoolClosed, Put and AddShared close what they are given, and
// GetShared and TryGet find nothing. Connections in use are the caller's to
// close. Close is idempotent.
func (p *Pool[K, C]) Close() {
	if p.closed.Swap(true) {
		return
	}
	p.expiry.stop()
	var cs []C
	var shared []SharedConn
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		s.keys.each(func(ks *keyState[K, C]) {
			ks.eachIdle(func(c C) { cs = append(cs, c) })
			shared = append(shared, ks.shared...)
			for ks.waiters.hand(waitResult[C]{err: ErrPoolClosed}) {
			}
		})
		s.keys.reset()
		s.idleKeys, s.sharedKeys, s.free = nil, nil, nil
		s.watermark.Store(noIdle)
		s.idleCount.Store(0)
		s.sharedCount.Store(0)
		s.mu.Unlock()
	}
	p.idleTotal.Store(0)
	closeAll(cs)
	for _, s := range shared {
		s.Close()
	}
}
