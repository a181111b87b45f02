package idlepool

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func waitersLen(p *Pool[string, *testConn], key string) int {
	s, h := p.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.lookupLocked(h, key); ks != nil {
		return ks.waiters.len()
	}
	return 0
}

// untilWaiters blocks until key has n queued waiters (an event, not a time).
func untilWaiters(t *testing.T, p *Pool[string, *testConn], key string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for waitersLen(p, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %d waiters on %q (have %d)", n, key, waitersLen(p, key))
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

type acquired struct {
	who    int
	c      *testConn
	reused bool
	err    error
}

func startWaiter(ctx context.Context, p *Pool[string, *testConn], key string, who int, out chan<- acquired) {
	go func() {
		c, _, reused, err := p.Acquire(ctx, key)
		out <- acquired{who, c, reused, err}
	}()
}

func TestWaitersServedInOrder(t *testing.T) {
	tests := []struct {
		name    string
		handOff func(p *Pool[string, *testConn], c *testConn) // how the holder gives its slot up
		reused  bool
	}{
		{"put hands the conn", func(p *Pool[string, *testConn], c *testConn) { p.Put("k", c) }, true},
		{"release hands a slot", func(p *Pool[string, *testConn], c *testConn) { c.Close(); p.Release("k") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New[string, *testConn](Config{MaxConnsPerKey: 1})
			defer p.Close()
			holder := dial(t, p, "k", 0)
			out := make(chan acquired)
			const n = 5
			for i := range n {
				startWaiter(context.Background(), p, "k", i, out)
				untilWaiters(t, p, "k", i+1)
			}
			if _, _, ok := p.TryGet("k"); ok {
				t.Fatal("TryGet found an idle conn while waiters queue")
			}
			tt.handOff(p, holder)
			for want := range n {
				r := <-out
				if r.err != nil || r.who != want || r.reused != tt.reused {
					t.Fatalf("served %+v, want waiter %d reused=%v", r, want, tt.reused)
				}
				c := r.c
				if !tt.reused {
					c = newConn(want + 1)
				}
				tt.handOff(p, c)
			}
			if st := p.Stats(); st.Waits != n || st.CancelledWaits != 0 {
				t.Fatalf("Stats = %+v", st)
			}
		})
	}
}

func TestCancelledWaiterLeavesQueue(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	defer p.Close()
	holder := dial(t, p, "k", 0)
	out := make(chan acquired)
	ctx, cancel := context.WithCancel(context.Background())
	startWaiter(ctx, p, "k", 1, out)
	untilWaiters(t, p, "k", 1)
	startWaiter(context.Background(), p, "k", 2, out)
	untilWaiters(t, p, "k", 2)
	cancel()
	if r := <-out; r.who != 1 || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter got %+v", r)
	}
	if n := waitersLen(p, "k"); n != 1 {
		t.Fatalf("%d waiters left, want 1", n)
	}
	p.Put("k", holder)
	if r := <-out; r.who != 2 || r.c != holder || !r.reused {
		t.Fatalf("remaining waiter got %+v", r)
	}
	if st := p.Stats(); st.CancelledWaits != 1 {
		t.Fatalf("CancelledWaits = %d", st.CancelledWaits)
	}
}

// TestHandedWhileCancelling drives the race deterministically: the waiter is
// handed a conn (or a slot) and only then gives up.
func TestHandedWhileCancelling(t *testing.T) {
	tests := []struct {
		name     string
		hand     func(p *Pool[string, *testConn], c *testConn)
		wantIdle int
		wantLive int
	}{
		{"handed a conn: it goes back idle", func(p *Pool[string, *testConn], c *testConn) { p.Put("k", c) }, 1, 1},
		{"handed a slot: it is released", func(p *Pool[string, *testConn], c *testConn) { c.Close(); p.Release("k") }, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New[string, *testConn](Config{MaxConnsPerKey: 1})
			defer p.Close()
			holder := dial(t, p, "k", 0)
			s, h := p.locate("k")
			w := &waiter[*testConn]{ch: make(chan waitResult[*testConn], 1)}
			s.mu.Lock()
			s.lookupLocked(h, "k").pushWaiter(w)
			s.mu.Unlock()
			tt.hand(p, holder)
			p.giveUp("k", w)
			if p.IdleLen("k") != tt.wantIdle || p.ConnsLen("k") != tt.wantLive {
				t.Fatalf("IdleLen %d ConnsLen %d, want %d %d", p.IdleLen("k"), p.ConnsLen("k"), tt.wantIdle, tt.wantLive)
			}
			// And the slot or conn is usable by the next caller.
			c, _, reused, err := p.Acquire(context.Background(), "k")
			if err != nil || reused != (tt.wantIdle == 1) || (reused && c != holder) {
				t.Fatalf("next Acquire = %v %v %v", c, reused, err)
			}
		})
	}
}

// TestManyGoroutinesSmallLimit: 200 goroutines share 2 keys limited to 3
// connections each; some give up early, some close instead of putting back.
// No more than 3 holders per key at once, no deadlock, no lost or doubly
// closed connection.
func TestManyGoroutinesSmallLimit(t *testing.T) {
	const (
		goroutines = 200
		rounds     = 25
		limit      = 3
	)
	p := New[string, *testConn](Config{MaxConnsPerKey: limit})
	keys := []string{"a", "b"}
	var holders [2]atomic.Int32
	var mu sync.Mutex // guards all
	var all []*testConn
	var failures atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range rounds {
				ki := rng.IntN(len(keys))
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if rng.IntN(4) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
				}
				c, _, reused, err := p.Acquire(ctx, keys[ki])
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						failures.Add(1)
					}
					continue
				}
				if n := holders[ki].Add(1); n > limit {
					failures.Add(1)
				}
				if !reused {
					c = newConn(g)
					mu.Lock()
					all = append(all, c)
					mu.Unlock()
				}
				runtime.Gosched()
				holders[ki].Add(-1)
				switch rng.IntN(5) {
				case 0: // the caller saw it break
					c.Close()
					p.Release(keys[ki])
				default:
					p.Put(keys[ki], c)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("deadlock: goroutines still waiting")
	}
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d failures (unexpected error or more than %d holders)", n, limit)
	}
	for _, k := range keys {
		if waitersLen(p, k) != 0 {
			t.Fatalf("waiters left on %q", k)
		}
		if p.ConnsLen(k) != p.IdleLen(k) || p.ConnsLen(k) > limit {
			t.Fatalf("key %q: ConnsLen %d IdleLen %d: slots leaked", k, p.ConnsLen(k), p.IdleLen(k))
		}
	}
	p.Close()
	p.closers.Wait()
	for _, c := range all {
		if n := c.closed.Load(); n != 1 {
			t.Fatalf("conn closed %d times, want exactly 1", n)
		}
	}
}

// TestHandToWaiter: HandToWaiterHashed gives a connection to the first
// waiter, as Put does, and with nobody waiting leaves the pool untouched
// (nothing idle, the slot still the caller's).
func TestHandToWaiter(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	defer p.Close()
	held := dial(t, p, "k", 1)
	if p.HandToWaiterHashed("k", p.Hash("k"), held) {
		t.Fatal("handed with nobody waiting")
	}
	if c, _, ok := p.TryGet("k"); ok {
		t.Fatalf("HandToWaiter without a waiter left %v idle", c)
	}
	out := make(chan acquired, 1)
	startWaiter(context.Background(), p, "k", 2, out)
	untilWaiters(t, p, "k", 1)
	if !p.HandToWaiterHashed("k", p.Hash("k"), held) {
		t.Fatal("not handed to the waiter")
	}
	if r := <-out; r.err != nil || !r.reused || r.c != held {
		t.Fatalf("waiter got %+v, want the held conn, reused", r)
	}
	if held.isClosed() {
		t.Fatal("the handed conn was closed")
	}
	if q := New[string, *testConn](Config{}); q.HandToWaiterHashed("k", q.Hash("k"), held) {
		t.Fatal("handed on a pool without MaxConnsPerKey")
	}
}
