package altsvc

import (
	"fmt"
	"testing"
)

// TestShardChainsCollidingHashes forces several origins onto one hash, which
// real 64-bit hashes almost never produce, to check the collision chain.
func TestShardChainsCollidingHashes(t *testing.T) {
	var s shard
	const h = 42
	var origins []Origin
	for i := 0; i < 4; i++ {
		o := mustOrigin(t, fmt.Sprintf("https://c%d.example", i))
		origins = append(origins, o)
		s.insert(h, &originEntry{origin: o})
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
	if len(s.origins) != 0 {
		t.Fatalf("map keeps %d empty chains", len(s.origins))
	}
}
