package altsvc

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// shard is one slice of the origin space with its own lock. Its index is a
// map keyed by the 64-bit hash of the origin (computed once per call and
// also used to pick the shard), so a lookup costs one integer-keyed probe;
// the rare origins whose hashes collide are chained through
// originEntry.next.
type shard struct {
	mu      sync.RWMutex            // guards origins and every entry's fields except lastUsed
	origins map[uint64]*originEntry // nil until the first write

	// minExpiry is a lower bound of the earliest expiry in the shard;
	// written under mu, read without it by sweeps that skip idle shards.
	minExpiry atomic.Int64
	_         [64]byte
}

// hashSeed is package-wide so that the zero Cache needs no initialisation.
var hashSeed = maphash.MakeSeed()

func originHash(o Origin) uint64 {
	return maphash.String(hashSeed, o.host) ^ uint64(o.port)*0x9E3779B97F4A7C15
}

// get returns o's entry; the caller holds s.mu (read or write).
func (s *shard) get(h uint64, o Origin) *originEntry {
	for e := s.origins[h]; e != nil; e = e.next {
		if e.origin == o {
			return e
		}
	}
	return nil
}

// insert adds e (for an origin not present); the caller holds s.mu.
func (s *shard) insert(h uint64, e *originEntry) {
	if s.origins == nil {
		s.origins = make(map[uint64]*originEntry)
	}
	e.next = s.origins[h]
	s.origins[h] = e
}

// remove unlinks o's entry and reports whether there was one; the caller
// holds s.mu.
func (s *shard) remove(h uint64, o Origin) bool {
	var prev *originEntry
	for e := s.origins[h]; e != nil; prev, e = e, e.next {
		if e.origin != o {
			continue
		}
		switch {
		case prev != nil:
			prev.next = e.next
		case e.next != nil:
			s.origins[h] = e.next
		default:
			delete(s.origins, h)
		}
		e.next = nil
		return true
	}
	return false
}

// filter calls keep for every entry and removes those it rejects, returning
// how many were removed; the caller holds s.mu for writing.
func (s *shard) filter(keep func(e *originEntry) bool) int {
	removed := 0
	for h, head := range s.origins {
		var newHead, tail *originEntry
		for e := head; e != nil; {
			next := e.next
			e.next = nil
			if keep(e) {
				if tail == nil {
					newHead = e
				} else {
					tail.next = e
				}
				tail = e
			} else {
				removed++
			}
			e = next
		}
		if newHead == nil {
			delete(s.origins, h)
		} else if newHead != head {
			s.origins[h] = newHead
		}
	}
	return removed
}

// each calls f for every entry; the caller holds s.mu.
func (s *shard) each(f func(e *originEntry)) {
	for _, head := range s.origins {
		for e := head; e != nil; e = e.next {
			f(e)
		}
	}
}

// lowerMinExpiry lowers the shard's bound to t; the caller holds s.mu.
func (s *shard) lowerMinExpiry(t int64) {
	if t < s.minExpiry.Load() {
		s.minExpiry.Store(t)
	}
}
