package idlepool

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// doneCounting is a context that counts its Done calls; transport hands
// Acquire such a context (it arms its cancellation watchers in Done), so
// Acquire must call Done only when it is about to wait.
type doneCounting struct {
	context.Context
	dones     atomic.Int32
	firstOnce sync.Once
	first     chan struct{} // closed at the first Done call
}

func newDoneCounting(ctx context.Context) *doneCounting {
	return &doneCounting{Context: ctx, first: make(chan struct{})}
}

func (c *doneCounting) Done() <-chan struct{} {
	c.dones.Add(1)
	c.firstOnce.Do(func() { close(c.first) })
	return c.Context.Done()
}

func TestAcquireCallsDoneOnlyToWait(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1, MaxIdlePerKey: 1})
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A free slot: permission to dial, no wait.
	c := newDoneCounting(ctx)
	if _, _, reused, err := p.Acquire(c, "k"); err != nil || reused {
		t.Fatalf("first Acquire: reused %v, err %v", reused, err)
	}
	conn := newConn(1)
	p.Put("k", conn)
	// An idle hit: no wait.
	if got, _, reused, err := p.Acquire(c, "k"); err != nil || !reused || got != conn {
		t.Fatalf("idle hit: %v %v %v", got, reused, err)
	}
	if n := c.dones.Load(); n != 0 {
		t.Fatalf("Done called %d times by Acquires that did not wait", n)
	}

	// The key is full: the next Acquire waits, so it asks for Done. The
	// waiter is queued before it calls Done, so the test waits for the call
	// itself rather than for the queue.
	w := newDoneCounting(ctx)
	out := make(chan acquired, 1)
	startWaiter(w, p, "k", 2, out)
	select {
	case <-w.first:
	case <-time.After(time.Minute):
		t.Fatal("a waiting Acquire never called Done: it could not be cancelled")
	}
	untilWaiters(t, p, "k", 1)
	p.Put("k", conn)
	if a := <-out; a.err != nil || !a.reused || a.c != conn {
		t.Fatalf("waiter: %+v", a)
	}
}
