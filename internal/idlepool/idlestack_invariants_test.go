package idlepool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// checkIdleStacks locks every shard of p and checks the idle stack
// invariants of every key in its table and every state on its free list:
// nidle is ntop plus len(spill); the whole stack, spill then top[:ntop], is
// oldest first; nothing is kept past ntop or past len(spill) (up to the
// spill's capacity, which a recycled state keeps); a key is in idleKeys, at
// its idleIdx, iff it has something idle; the shard's idle count is the sum
// of its keys'; and a state on the free list holds nothing and is marked as
// out of the table.
func checkIdleStacks(t *testing.T, p *Pool[string, *testConn], when string) {
	t.Helper()
	var zero idleEntry[*testConn]
	checkStack := func(ks *keyState[string, *testConn], what string) {
		t.Helper()
		if int(ks.nidle) != int(ks.ntop)+len(ks.spill) {
			t.Fatalf("%s: %s: nidle %d, ntop %d, spill %d", when, what, ks.nidle, ks.ntop, len(ks.spill))
		}
		for i, e := range ks.top[ks.ntop:] {
			if e != zero {
				t.Fatalf("%s: %s: top[%d] past ntop %d keeps conn %v", when, what, int(ks.ntop)+i, ks.ntop, connID(e.c))
			}
		}
		for i, e := range ks.spill[len(ks.spill):cap(ks.spill)] {
			if e != zero {
				t.Fatalf("%s: %s: spill[%d] past len %d keeps conn %v", when, what, len(ks.spill)+i, len(ks.spill), connID(e.c))
			}
		}
		prev := int64(-1 << 63)
		for i := range int(ks.nidle) {
			e := ks.idleAt(i)
			if e.c == nil || e.since < prev {
				t.Fatalf("%s: %s: entry %d (conn %v since %d) after since %d", when, what, i, connID(e.c), e.since, prev)
			}
			prev = e.since
		}
	}
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		total := 0
		s.keys.each(func(ks *keyState[string, *testConn]) {
			what := fmt.Sprintf("shard %d key %q", i, ks.key)
			checkStack(ks, what)
			total += int(ks.nidle)
			if !ks.inTable {
				t.Fatalf("%s: %s: in the table but inTable is false", when, what)
			}
			listed := ks.idleIdx >= 0 && int(ks.idleIdx) < len(s.idleKeys) && s.idleKeys[ks.idleIdx] == ks
			if listed != (ks.nidle > 0) || (ks.nidle == 0 && ks.idleIdx != -1) {
				t.Fatalf("%s: %s: nidle %d, idleIdx %d, listed %v", when, what, ks.nidle, ks.idleIdx, listed)
			}
		})
		if int64(total) != s.idleCount.Load() {
			t.Fatalf("%s: shard %d: idleCount %d, keys hold %d", when, i, s.idleCount.Load(), total)
		}
		oldest := int64(noIdle) // computed here: oldestLocked would store it
		for _, ks := range s.idleKeys {
			oldest = min(oldest, ks.oldestIdle().since)
		}
		if wm := s.watermark.Load(); wm > oldest {
			t.Fatalf("%s: shard %d: watermark %d above the oldest idle entry %d", when, i, wm, oldest)
		}
		for j, ks := range s.free {
			what := fmt.Sprintf("shard %d free[%d]", i, j)
			checkStack(ks, what)
			if ks.nidle != 0 || ks.conns != 0 || ks.inTable || ks.key != "" {
				t.Fatalf("%s: %s: nidle %d conns %d inTable %v key %q", when, what, ks.nidle, ks.conns, ks.inTable, ks.key)
			}
		}
		s.mu.Unlock()
	}
}

// TestIdleStackInvariants drives keys well past the inline entries through
// every path that touches the idle stack (Put, a refused Put, Acquire's
// written-out pop, TryGet, a sweep from a get or put, eviction under
// MaxIdle, CloseIdle, the timer's sweep via SetIdleTimeout, key recycling
// through the free list) and after every call checks the stacks' internal
// invariants, which the model test cannot see: that a removed entry is
// zeroed (the pool must not keep a connection it gave away or closed
// reachable), that counts and listings agree, and that Stats().Idle is the
// sum of IdleLen.
func TestIdleStackInvariants(t *testing.T) {
	const timeout = 100 * time.Millisecond
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 11))
		perKey := 3 + rng.IntN(5)
		maxIdle := 0
		if seed%3 == 0 {
			maxIdle = 4 + rng.IntN(8)
		}
		t.Run(fmt.Sprintf("seed_%d_perkey_%d_maxidle_%d", seed, perKey, maxIdle), func(t *testing.T) {
			clk := newClock()
			p := New[string, *testConn](Config{MaxIdlePerKey: perKey, MaxIdle: maxIdle, IdleTimeout: timeout, Clock: clk.Now})
			var all []*testConn
			held := map[string][]*testConn{}
			for step := range 300 {
				clk.Advance(time.Duration(1+rng.IntN(12)) * time.Millisecond)
				key := keys[rng.IntN(len(keys))]
				op := rng.IntN(24)
				switch {
				case op < 10: // put a new conn, or one the caller holds
					var c *testConn
					if h := held[key]; len(h) > 0 && op%2 == 0 {
						c, held[key] = h[len(h)-1], h[:len(h)-1]
					} else {
						c = newConn(len(all))
						all = append(all, c)
					}
					p.Put(key, c)
				case op < 20: // get
					var c *testConn
					var ok bool
					if op%2 == 0 {
						var err error
						c, _, ok, err = p.Acquire(context.Background(), key)
						if err != nil {
							t.Fatal(err)
						}
						if !ok { // permission to dial: give the slot back
							p.Release(key)
						}
					} else {
						c, _, ok = p.TryGet(key)
					}
					if ok {
						if c.isClosed() {
							t.Fatalf("step %d: got closed conn %d", step, c.id)
						}
						held[key] = append(held[key], c)
					}
				case op < 21:
					p.CloseIdle()
				case op < 22:
					// Large step: the next call's sweep takes a prefix that
					// may span the spill and the top.
					clk.Advance(time.Duration(60+rng.IntN(40)) * time.Millisecond)
				case op < 23:
					p.SetIdleTimeout(timeout) // sweeps every shard that is due
				default:
					for _, c := range held[key] {
						c.Close()
						p.Release(key)
					}
					held[key] = nil
				}
				checkIdleStacks(t, p, fmt.Sprintf("step %d (op %d, key %s)", step, op, key))
				sum := 0
				for _, k := range keys {
					sum += p.IdleLen(k)
				}
				if st := p.Stats(); st.Idle != sum {
					t.Fatalf("step %d: Stats().Idle %d, sum of IdleLen %d", step, st.Idle, sum)
				}
			}
			p.Close()
			p.closers.Wait()
			for _, h := range held {
				for _, c := range h {
					c.Close()
				}
			}
			for _, c := range all {
				if n := c.closed.Load(); n != 1 {
					t.Fatalf("conn %d closed %d times, want 1", c.id, n)
				}
			}
		})
	}
}

// sameShardKey returns a key other than key in key's shard of p.
func sameShardKey(p *Pool[string, *testConn], key string) string {
	want := p.shardFor(key)
	for i := 0; ; i++ {
		if k := fmt.Sprintf("other-%d", i); p.shardFor(k) == want {
			return k
		}
	}
}

// TestPutHandOffClosesSwept: a Put sweeps its shard before it looks at the
// key, so a Put that hands its connection to a waiter may have removed
// expired connections of other keys; it must close them as every other
// return of Put does.
func TestPutHandOffClosesSwept(t *testing.T) {
	clk := newClock()
	p := New[string, *testConn](Config{MaxConnsPerKey: 1, IdleTimeout: time.Minute, Clock: clk.Now})
	defer p.Close()
	other := sameShardKey(p, "a")
	if _, _, _, err := p.Acquire(context.Background(), "a"); err != nil { // a's only slot
		t.Fatal(err)
	}
	out := make(chan acquired, 1)
	startWaiter(context.Background(), p, "a", 1, out)
	untilWaiters(t, p, "a", 1)
	stale := newConn(1)
	if !p.Put(other, stale) {
		t.Fatal("Put rejected")
	}
	clk.Advance(2 * time.Minute)
	ca := newConn(2)
	if !p.Put("a", ca) {
		t.Fatal("Put to a waiter returned false")
	}
	if r := <-out; r.err != nil || r.c != ca || !r.reused {
		t.Fatalf("waiter got %+v, want conn %d reused", r, ca.id)
	}
	p.closers.Wait()
	if n := p.IdleLen(other); n != 0 {
		t.Fatalf("IdleLen(%s) = %d, want 0 after the sweep", other, n)
	}
	if !stale.isClosed() {
		t.Fatal("the connection the Put's sweep expired was never closed")
	}
	ca.Close()
	p.Release("a")
}

// TestEvictOldestSeesSpill: the oldest idle connection of a key with more
// than the inline entries is in its spill, not at the bottom of its top;
// eviction under MaxIdle must close that one, not a newer connection of
// another key.
func TestEvictOldestSeesSpill(t *testing.T) {
	clk := newClock()
	p := New[string, *testConn](Config{MaxIdlePerKey: 4, MaxIdle: 4, Clock: clk.Now})
	defer p.Close()
	a1, b1, a2, a3, c1 := newConn(1), newConn(2), newConn(3), newConn(4), newConn(5)
	for _, put := range []struct {
		key string
		c   *testConn
	}{{"a", a1}, {"b", b1}, {"a", a2}, {"a", a3}, {"c", c1}} {
		clk.Advance(time.Second)
		if !p.Put(put.key, put.c) {
			t.Fatalf("Put(%s, %d) rejected", put.key, put.c.id)
		}
	}
	// a's stack is spill [a1], top [a2 a3]; b1 is older than a2. The fifth
	// Put went over MaxIdle, and a1 is the oldest of all.
	p.closers.Wait()
	if !a1.isClosed() || b1.isClosed() {
		t.Fatalf("evicted: a1 %v, b1 %v; want a1 only", a1.isClosed(), b1.isClosed())
	}
	if a, b := p.IdleLen("a"), p.IdleLen("b"); a != 2 || b != 1 {
		t.Fatalf("IdleLen a %d b %d, want 2 and 1", a, b)
	}
}

// TestCloseIdleReleasesEverySlot: CloseIdle releases one slot per idle
// connection it closes, spilled ones included, so a key whose connections
// were all acquired and put back holds no slot afterwards.
func TestCloseIdleReleasesEverySlot(t *testing.T) {
	p := New[string, *testConn](Config{MaxIdlePerKey: 5, MaxConnsPerKey: 5})
	defer p.Close()
	for range 5 {
		if _, _, reused, err := p.Acquire(context.Background(), "a"); err != nil || reused {
			t.Fatalf("Acquire: reused %v, %v", reused, err)
		}
	}
	conns := make([]*testConn, 5)
	for i := range conns {
		conns[i] = newConn(i)
		if !p.Put("a", conns[i]) {
			t.Fatal("Put rejected")
		}
	}
	p.CloseIdle()
	if n := p.ConnsLen("a"); n != 0 {
		t.Fatalf("ConnsLen after CloseIdle = %d, want 0", n)
	}
	for _, c := range conns {
		if !c.isClosed() {
			t.Fatalf("conn %d not closed", c.id)
		}
	}
	// Every slot is free again: five Acquires get permission to dial
	// without waiting.
	for range 5 {
		if _, _, reused, err := p.Acquire(context.Background(), "a"); err != nil || reused {
			t.Fatalf("Acquire after CloseIdle: reused %v, %v", reused, err)
		}
	}
	for range 5 {
		p.Release("a")
	}
}
