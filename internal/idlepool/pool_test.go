package idlepool

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// dial takes permission to dial key and returns a fresh conn holding the slot.
func dial(t *testing.T, p *Pool[string, *testConn], key string, id int) *testConn {
	t.Helper()
	c, _, reused, err := p.Acquire(context.Background(), key)
	if err != nil || reused {
		t.Fatalf("Acquire(%q) = %v reused=%v err=%v, want permission to dial", key, c, reused, err)
	}
	return newConn(id)
}

// putNew dials and puts one conn for each key, in order.
func putNew(t *testing.T, p *Pool[string, *testConn], keys ...string) []*testConn {
	t.Helper()
	var cs []*testConn
	for i, k := range keys {
		c := dial(t, p, k, i)
		if !p.Put(k, c) {
			t.Fatalf("Put(%q) rejected", k)
		}
		cs = append(cs, c)
	}
	return cs
}

// keysByShard returns n keys that land in one shard (same) or in n
// different shards.
func keysByShard(p *Pool[string, *testConn], n int, same bool) []string {
	var keys []string
	seen := map[*shard[string, *testConn]]bool{}
	var first *shard[string, *testConn]
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("key-%d", i)
		s := p.shardFor(k)
		if same {
			if first == nil {
				first = s
			}
			if s != first {
				continue
			}
		} else if seen[s] {
			continue
		}
		seen[s] = true
		keys = append(keys, k)
	}
	return keys
}

func TestLIFO(t *testing.T) {
	p := New[string, *testConn](Config{MaxIdlePerKey: 3})
	defer p.Close()
	a, b, c := dial(t, p, "a", 1), dial(t, p, "a", 2), dial(t, p, "a", 3)
	for _, x := range []*testConn{a, b, c} {
		if !p.Put("a", x) {
			t.Fatalf("Put(%d) rejected", x.id)
		}
	}
	for _, want := range []int{3, 2, 1} {
		got, _, reused, err := p.Acquire(context.Background(), "a")
		if err != nil || !reused || got.id != want {
			t.Fatalf("Acquire = %v reused=%v err=%v, want conn %d", got, reused, err, want)
		}
	}
	if got, _, ok := p.TryGet("a"); ok {
		t.Fatalf("TryGet on an emptied key returned %v", got)
	}
}

func TestIdleForFromClock(t *testing.T) {
	clk := newClock()
	p := New[string, *testConn](Config{Clock: clk.Now})
	defer p.Close()
	putNew(t, p, "a")
	clk.Advance(1500 * time.Millisecond)
	_, idleFor, ok := p.TryGet("a")
	if !ok || idleFor != 1500*time.Millisecond {
		t.Fatalf("TryGet = ok %v idleFor %v, want true 1.5s", ok, idleFor)
	}
}

func TestPerKeyCap(t *testing.T) {
	tests := []struct {
		name     string
		perKey   int
		maxIdle  int
		wantKept int
	}{
		{"zero means default 2", 0, 0, DefaultMaxIdlePerKey},
		{"explicit 3", 3, 0, 3},
		{"one", 1, 0, 1},
		{"negative keeps nothing", -1, 0, 0},
		{"negative global keeps nothing", 5, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New[string, *testConn](Config{MaxIdlePerKey: tt.perKey, MaxIdle: tt.maxIdle})
			defer p.Close()
			var conns []*testConn
			for i := range 5 {
				conns = append(conns, dial(t, p, "k", i))
			}
			for i, c := range conns {
				kept := p.Put("k", c)
				if want := i < tt.wantKept; kept != want {
					t.Fatalf("Put #%d kept=%v, want %v", i, kept, want)
				}
				if c.isClosed() == kept {
					t.Fatalf("Put #%d kept=%v but closed=%v", i, kept, c.isClosed())
				}
			}
			if n := p.IdleLen("k"); n != tt.wantKept {
				t.Fatalf("IdleLen = %d, want %d", n, tt.wantKept)
			}
			// Rejected conns released their slots; kept ones still hold one.
			if n := p.ConnsLen("k"); n != tt.wantKept {
				t.Fatalf("ConnsLen = %d, want %d", n, tt.wantKept)
			}
			if st := p.Stats(); st.Rejected != uint64(5-tt.wantKept) || st.Idle != tt.wantKept {
				t.Fatalf("Stats = %+v, want Rejected %d Idle %d", st, 5-tt.wantKept, tt.wantKept)
			}
		})
	}
}

func TestGlobalCapEvictsOldest(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same_shard=%v", same), func(t *testing.T) {
			clk := newClock()
			p := New[string, *testConn](Config{MaxIdle: 3, MaxIdlePerKey: 5, Clock: clk.Now})
			defer p.Close()
			keys := keysByShard(p, 4, same)
			var conns []*testConn
			for _, k := range keys {
				conns = append(conns, putNew(t, p, k)...)
				clk.Advance(time.Second)
			}
			p.closers.Wait()
			if !conns[0].isClosed() {
				t.Fatal("the oldest idle conn was not evicted")
			}
			for _, c := range conns[1:] {
				if c.isClosed() {
					t.Fatalf("conn %d closed, only the oldest should be", c.id)
				}
			}
			if n := p.IdleLen(keys[0]); n != 0 {
				t.Fatalf("evicted key still has %d idle", n)
			}
			if n := p.ConnsLen(keys[0]); n != 0 {
				t.Fatalf("evicted conn kept its slot: ConnsLen = %d", n)
			}
			if st := p.Stats(); st.Evictions != 1 || st.Idle != 3 {
				t.Fatalf("Stats = %+v, want 1 eviction, 3 idle", st)
			}
			// Taking the next oldest and putting more evicts in age order.
			putNew(t, p, keys[0])
			p.closers.Wait()
			if !conns[1].isClosed() || conns[2].isClosed() {
				t.Fatal("second eviction did not take the next oldest")
			}
		})
	}
}

func TestAcquireAfterCloseAndCancelledContext(t *testing.T) {
	p := New[string, *testConn](Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := p.Acquire(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with cancelled ctx: err = %v", err)
	}
	if n := p.ConnsLen("a"); n != 0 {
		t.Fatalf("a cancelled Acquire reserved a slot: %d", n)
	}
	var nilCtx context.Context // the bad input under test
	if _, _, _, err := p.Acquire(nilCtx, "a"); !errors.Is(err, ErrNilContext) {
		t.Fatalf("Acquire(nil ctx): err = %v, want ErrNilContext", err)
	}
	c := dial(t, p, "a", 1)
	p.Close()
	if _, _, _, err := p.Acquire(context.Background(), "a"); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("Acquire after Close: err = %v, want ErrPoolClosed", err)
	}
	if p.Put("a", c) || !c.isClosed() {
		t.Fatal("Put after Close must close the conn and return false")
	}
	p.Close() // idempotent
}

func TestPutWithoutSlotCountsOne(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	defer p.Close()
	c := newConn(1)
	if !p.Put("a", c) {
		t.Fatal("Put rejected")
	}
	if n := p.ConnsLen("a"); n != 1 {
		t.Fatalf("ConnsLen = %d, want 1", n)
	}
	p.Release("a")
	p.Release("a") // extra releases never go negative
	if n := p.ConnsLen("a"); n != 0 {
		t.Fatalf("ConnsLen after releases = %d, want 0 (the idle conn is still there, but the count is clamped)", n)
	}
}

func TestStats(t *testing.T) {
	p := New[string, *testConn](Config{})
	defer p.Close()
	putNew(t, p, "a", "b")
	if _, _, ok := p.TryGet("a"); !ok {
		t.Fatal("TryGet(a) missed")
	}
	p.TryGet("zzz")
	st := p.Stats()
	// putNew's two Acquires missed, TryGet("zzz") missed; one hit.
	if st.Hits != 1 || st.Misses != 3 || st.Idle != 1 {
		t.Fatalf("Stats = %+v, want Hits 1 Misses 3 Idle 1", st)
	}
}
