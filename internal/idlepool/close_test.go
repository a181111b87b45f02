package idlepool

import (
	"context"
	"errors"
	"testing"
	"time"
)

// blockingConn returns a conn whose Close blocks until release is closed,
// and a channel closed once Close has been entered.
func blockingConn(id int) (c *testConn, release chan struct{}) {
	c = newConn(id)
	c.block = make(chan struct{})
	return c, c.block
}

// mustFinish runs f and fails if it does not return (it would be stuck
// behind a blocked Close).
func mustFinish(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s is stuck behind a blocked Close", what)
	}
}

// otherKeysWork exercises the pool on keys in the blocked conn's shard and in
// others.
func otherKeysWork(t *testing.T, p *Pool[string, *testConn], blockedKey string) {
	t.Helper()
	same := keysByShard(p, 64, false)
	for _, k := range append(same, blockedKey+"x") {
		if k == blockedKey {
			continue
		}
		mustFinish(t, "get/put on "+k, func() {
			c, _, _, err := p.Acquire(context.Background(), k)
			if err != nil {
				t.Errorf("Acquire(%q): %v", k, err)
				return
			}
			if c == nil {
				c = newConn(99)
			}
			p.Put(k, c)
			p.TryGet(k)
			p.Release(k)
		})
	}
}

func TestBlockingCloseDoesNotBlockOthers(t *testing.T) {
	tests := []struct {
		name string
		// discard makes the pool close the blocking conn of key "slow",
		// running in the background if it blocks its caller.
		discard func(t *testing.T, p *Pool[string, *testConn], clk *fakeClock) (waitDone func())
	}{
		{"CloseIdle", func(t *testing.T, p *Pool[string, *testConn], clk *fakeClock) func() {
			done := make(chan struct{})
			go func() { p.CloseIdle(); close(done) }()
			return func() { <-done }
		}},
		{"eviction on put", func(t *testing.T, p *Pool[string, *testConn], clk *fakeClock) func() {
			clk.Advance(time.Second)
			mustFinish(t, "evicting Put", func() {
				for _, k := range []string{"e1", "e2"} {
					putNew(t, p, k)
				}
			})
			return p.closers.Wait
		}},
		{"expiry on get", func(t *testing.T, p *Pool[string, *testConn], clk *fakeClock) func() {
			clk.Advance(time.Hour)
			mustFinish(t, "expiring TryGet", func() { p.TryGet("slow") })
			return p.closers.Wait
		}},
		{"expiry by the timer", func(t *testing.T, p *Pool[string, *testConn], clk *fakeClock) func() {
			clk.Advance(time.Hour)
			done := make(chan struct{})
			go func() { p.fire(); close(done) }()
			// A get or put of otherKeysWork in the slow conn's shard may
			// sweep it before the timer does, closing it in the background.
			return func() { <-done; p.closers.Wait() }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			p := New[string, *testConn](Config{MaxIdle: 2, IdleTimeout: time.Minute, Clock: clk.Now})
			defer p.Close()
			slow, release := blockingConn(1)
			dial(t, p, "slow", 1)
			p.Put("slow", slow)
			waitDone := tt.discard(t, p, clk)
			otherKeysWork(t, p, "slow")
			close(release)
			waitDone()
			if !slow.isClosed() {
				t.Fatal("the slow conn was never closed")
			}
		})
	}
}

func TestCloseWakesWaitersAndClosesAll(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	held := dial(t, p, "k", 0)
	idle := putNew(t, p, "other")[0]
	sh := &testShared{maxStreams: 1}
	dial(t, p, "h2", 0)
	p.AddShared("h2", sh)
	out := make(chan acquired)
	for i := range 3 {
		startWaiter(context.Background(), p, "k", i, out)
		untilWaiters(t, p, "k", i+1)
	}
	p.Close()
	for range 3 {
		if r := <-out; !errors.Is(r.err, ErrPoolClosed) {
			t.Fatalf("waiter got %+v, want ErrPoolClosed", r)
		}
	}
	if !idle.isClosed() || !sh.isClosed() {
		t.Fatal("Close left an idle or shared conn open")
	}
	if held.isClosed() {
		t.Fatal("Close closed a conn in use (the caller's to close)")
	}
	if p.Put("k", held) || !held.isClosed() {
		t.Fatal("Put after Close must close")
	}
	if _, ok := p.GetShared("h2"); ok {
		t.Fatal("GetShared after Close found a conn")
	}
	if _, armed := p.expiry.deadline(); armed {
		t.Fatal("timer armed after Close")
	}
}
