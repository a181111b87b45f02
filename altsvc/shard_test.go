package altsvc

import (
	"fmt"
	"testing"
)

// TestShardChainsCollidingHashes forces several origins onto one hash, which
// real 64-bit hashes almost never produce, to check the probe sequence.
func TestShardChainsCollidingHashes(t *testing.T) {
	var s shard
	const h = 42
	var origins []Origin
	var entries []*originEntry
	for i := 0; i < 4; i++ {
		o := mustOrigin(t, fmt.Sprintf("https://c%d.example", i))
		origins = append(origins, o)
		e := &originEntry{origin: o}
		entries = append(entries, e)
		s.insert(h, e)
	}
	for _, o := range origins {
		if e := s.get(h, o); e == nil || e.origin != o {
			t.Fatalf("get(%v) = %v", o, e)
		}
	}
	if s.get(h+1, origins[0]) != nil {
		t.Fatal("found an origin under another hash")
	}
	if !s.remove(h, origins[2]) || s.remove(h, origins[2]) || s.get(h, origins[2]) != nil {
		t.Fatal("remove of a middle entry")
	}
	if entries[2].view.Load() != &emptyView {
		t.Fatal("a removed entry keeps its alternatives for lookups that still hold the old table")
	}
	for _, i := range []int{0, 1, 3} {
		if s.get(h, origins[i]) != entries[i] {
			t.Fatalf("remove lost %v", origins[i])
		}
	}
	if removed := s.filter(func(e *originEntry) bool { return e.origin != origins[3] }); removed != 1 {
		t.Fatalf("filter removed %d, want 1", removed)
	}
	n := 0
	s.each(func(e *originEntry) {
		n++
		if e.origin != origins[0] && e.origin != origins[1] {
			t.Errorf("unexpected survivor %v", e.origin)
		}
	})
	if n != 2 {
		t.Fatalf("%d entries left, want 2", n)
	}
	s.remove(h, origins[0])
	s.remove(h, origins[1])
	if s.len() != 0 || s.table.Load() != nil {
		t.Fatalf("table keeps %d entries", s.len())
	}
}
