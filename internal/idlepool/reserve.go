package idlepool

// TryReserve reserves a slot of key without waiting and without taking an
// idle connection, for a connection the caller makes outside the pool's
// own Acquire (the transport's QUIC dials, which count against the same
// per-origin limit as its TCP connections). It reports false when the key
// already holds MaxConnsPerKey slots (a key with waiters is full, so a
// TryReserve never overtakes them) or the pool is closed. With no limit it
// always succeeds. A reserved slot is the caller's: it ends with Release,
// or moves to a connection given to Put or AddShared.
func (p *Pool[K, C]) TryReserve(key K) bool {
	s, h := p.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.closed.Load() {
		return false
	}
	ks := s.getOrCreateLocked(h, key)
	if p.maxConns > 0 && int(ks.conns) >= p.maxConns {
		return false
	}
	ks.conns++
	return true
}

// Waiting returns how many Acquire calls wait for a slot of key now.
func (p *Pool[K, C]) Waiting(key K) int {
	s, h := p.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.lookupLocked(h, key); ks != nil {
		return ks.waiters.len()
	}
	return 0
}
