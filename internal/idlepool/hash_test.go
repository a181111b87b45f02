package idlepool

import (
	"context"
	"fmt"
	"testing"
)

// TestHashedCallsMatchPlainOnes checks that a KeyHash from Hash files and
// finds a key exactly where the plain calls do, for keys over many shards:
// a connection put one way is got the other way, a shared connection added
// plainly is found through GetSharedTurnHashed, and the slot counts agree.
func TestHashedCallsMatchPlainOnes(t *testing.T) {
	tests := []struct {
		name       string
		putHashed  bool
		takeHashed bool
	}{
		{"put_hashed_acquire_plain", true, false},
		{"put_plain_acquire_hashed", false, true},
		{"both_hashed", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New[string, *testConn](Config{MaxIdlePerKey: 2})
			defer p.Close()
			ctx := context.Background()
			for i := range 200 {
				key := fmt.Sprintf("host-%d:443", i)
				kh := p.Hash(key)
				if again := p.Hash(key); again != kh {
					t.Fatalf("Hash(%q) = %d then %d", key, kh, again)
				}
				var c *testConn
				var reused bool
				var err error
				if tt.takeHashed {
					c, _, reused, err = p.AcquireTurnHashed(ctx, key, kh, nil)
				} else {
					c, _, reused, err = p.Acquire(ctx, key)
				}
				if err != nil || reused {
					t.Fatalf("first Acquire(%q): reused=%v err=%v, want permission to dial", key, reused, err)
				}
				c = newConn(i)
				if tt.putHashed {
					if !p.PutHashed(key, kh, c) {
						t.Fatalf("PutHashed(%q) rejected", key)
					}
				} else if !p.Put(key, c) {
					t.Fatalf("Put(%q) rejected", key)
				}
				if n := p.IdleLen(key); n != 1 {
					t.Fatalf("IdleLen(%q) = %d after one put, want 1", key, n)
				}
				if tt.takeHashed {
					c, _, reused, err = p.AcquireTurnHashed(ctx, key, kh, nil)
				} else {
					c, _, reused, err = p.Acquire(ctx, key)
				}
				if err != nil || !reused || c.id != i {
					t.Fatalf("second Acquire(%q) = %v reused=%v err=%v, want conn %d", key, c, reused, err, i)
				}
				if n := p.ConnsLen(key); n != 1 {
					t.Fatalf("ConnsLen(%q) = %d with one conn out, want 1", key, n)
				}
			}
		})
	}
}

func TestGetSharedTurnHashedFindsPlainAdd(t *testing.T) {
	p := New[string, *testConn](Config{})
	defer p.Close()
	dial(t, p, "h2", 0)
	s := &testShared{maxStreams: 1}
	p.AddShared("h2", s)
	var turn Turn
	got, ok := p.GetSharedTurnHashed("h2", p.Hash("h2"), &turn)
	if !ok || got != s {
		t.Fatalf("GetSharedTurnHashed = %v %v, want the added conn", got, ok)
	}
	if !turn.looked {
		t.Fatal("GetSharedTurnHashed did not record its look in the Turn")
	}
	if _, ok := p.GetSharedTurnHashed("h2", p.Hash("h2"), nil); ok {
		t.Fatal("GetSharedTurnHashed went past the stream limit")
	}
}
