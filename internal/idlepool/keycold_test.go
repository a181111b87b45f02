package idlepool

import (
	"fmt"
	"testing"
)

// TestRecycledKeyStatesKeepOwnCold: key states recycled through
// the shards' free lists each come back with their own cold part (shared
// connections, waiters): keys that are live at the same time never see
// each other's shared connections. Rounds of many keys fill every shard's
// free list, so later rounds are served from it.
func TestRecycledKeyStatesKeepOwnCold(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	defer p.Close()
	const keys = 512 // about 8 per shard, within maxFreeKeyStates
	for round := range 3 {
		conns := make([]*testShared, keys)
		for i := range conns {
			key := fmt.Sprintf("r%d-k%d", round, i)
			dial(t, p, key, i)
			conns[i] = &testShared{maxStreams: 1 << 20}
			p.AddShared(key, conns[i])
		}
		for i, want := range conns {
			key := fmt.Sprintf("r%d-k%d", round, i)
			if s, ok := p.GetShared(key); !ok || s != want {
				t.Fatalf("round %d: GetShared(%q) = %p %v, want its own conn %p", round, key, s, ok, want)
			}
			if n := p.ConnsLen(key); n != 1 {
				t.Fatalf("round %d: ConnsLen(%q) = %d, want 1", round, key, n)
			}
		}
		for i, s := range conns {
			p.RemoveShared(fmt.Sprintf("r%d-k%d", round, i), s)
		}
		for i := range conns {
			key := fmt.Sprintf("r%d-k%d", round, i)
			if n := p.ConnsLen(key); n != 0 {
				t.Fatalf("round %d: ConnsLen(%q) = %d after RemoveShared, want 0", round, key, n)
			}
		}
	}
}
