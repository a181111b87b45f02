package altsvc

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// shard is one slice of the origin space. Lookups read it without any lock:
// its index is an immutable originTable behind an atomic pointer, replaced
// (copy-on-write) by the writers, who serialise on mu. Adding or removing an
// origin copies the shard's table, O(origins/numShards); updating an origin's
// alternatives does not touch the table at all (see originEntry.view).
type shard struct {
	// mu serialises the writers of this shard: replacing table and
	// publishing a new view of any entry in it. Lookups never take it.
	mu    sync.Mutex
	table atomic.Pointer[originTable] // nil until the first origin arrives

	// minExpiry is a lower bound of the earliest expiry in the shard;
	// written under mu, read without it by sweeps that skip idle shards.
	minExpiry atomic.Int64
	_         [40]byte // one shard per cache line: writers of one do not slow lookups in another
}

// originTable is an open-addressing index (linear probing, at most a
// quarter full) from origin hash to entry. It is never modified once published.
type originTable struct {
	slots []tableSlot // power-of-two length
	n     int         // entries held
}

// tableSlot keeps the hash next to the pointer so that a probe compares
// origins only when the full 64-bit hashes are equal.
type tableSlot struct {
	hash uint64
	e    *originEntry // nil: empty slot
}

// hashSeed is package-wide so that the zero Cache needs no initialisation.
var hashSeed = maphash.MakeSeed()

func originHash(o Origin) uint64 {
	return maphash.String(hashSeed, o.host) ^ uint64(o.port)*0x9E3779B97F4A7C15
}

// get returns o's entry (h is its hash), or nil. It is safe without s.mu.
func (s *shard) get(h uint64, o Origin) *originEntry {
	t := s.table.Load()
	if t == nil {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.e == nil {
			return nil
		}
		if sl.hash == h && sl.e.origin == o {
			return sl.e
		}
	}
}

// insert adds e (for an origin not present, whose hash is h); the caller
// holds s.mu.
func (s *shard) insert(h uint64, e *originEntry) {
	old := s.table.Load()
	n := 1
	if old != nil {
		n += old.n
	}
	t := newOriginTable(n)
	if old != nil {
		for _, sl := range old.slots {
			if sl.e != nil {
				t.put(sl.hash, sl.e)
			}
		}
	}
	t.put(h, e)
	s.table.Store(t)
}

// remove unlinks o's entry, publishing an empty view in it first so that a
// lookup still holding the old table finds nothing either, and reports
// whether there was one; the caller holds s.mu.
func (s *shard) remove(h uint64, o Origin) bool {
	e := s.get(h, o)
	if e == nil {
		return false
	}
	s.filter(func(x *originEntry) bool { return x != e })
	return true
}

// filter calls keep for every entry and removes those it rejects (publishing
// an empty view in each), returning how many were removed; the caller holds
// s.mu. The table is replaced only when something was removed.
func (s *shard) filter(keep func(e *originEntry) bool) int {
	old := s.table.Load()
	if old == nil {
		return 0
	}
	kept := make([]tableSlot, 0, old.n)
	for _, sl := range old.slots {
		if sl.e == nil {
			continue
		}
		if keep(sl.e) {
			kept = append(kept, sl)
		} else {
			sl.e.view.Store(&emptyView)
		}
	}
	removed := old.n - len(kept)
	switch {
	case removed == 0:
	case len(kept) == 0:
		s.table.Store(nil)
	default:
		t := newOriginTable(len(kept))
		for _, sl := range kept {
			t.put(sl.hash, sl.e)
		}
		s.table.Store(t)
	}
	return removed
}

// each calls f for every entry. It is safe without s.mu (it sees the table
// as it was when each started).
func (s *shard) each(f func(e *originEntry)) {
	t := s.table.Load()
	if t == nil {
		return
	}
	for _, sl := range t.slots {
		if sl.e != nil {
			f(sl.e)
		}
	}
}

// len returns the number of origins indexed.
func (s *shard) len() int {
	if t := s.table.Load(); t != nil {
		return t.n
	}
	return 0
}

// lowerMinExpiry lowers the shard's bound to t; the caller holds s.mu.
func (s *shard) lowerMinExpiry(t int64) {
	if t < s.minExpiry.Load() {
		s.minExpiry.Store(t)
	}
}

// newOriginTable returns an empty table with room for n entries at most a
// quarter full, so that a lookup for an absent origin (the common question
// for a site without Alt-Svc) meets an empty slot after 1.4 probes on
// average.
func newOriginTable(n int) *originTable {
	size := 8
	for size < 4*n {
		size *= 2
	}
	return &originTable{slots: make([]tableSlot, size)}
}

// put adds an entry to a table that is not yet published.
func (t *originTable) put(h uint64, e *originEntry) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].e != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = tableSlot{hash: h, e: e}
	t.n++
}
