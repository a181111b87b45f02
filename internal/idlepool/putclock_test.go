package idlepool

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// gatedClock is a fakeClock whose next reading, once armed, is taken at
// the time of the call but returned only when release is closed: it stands
// for a Put that read the clock and then waited for its shard's lock while
// another Put ran.
type gatedClock struct {
	*fakeClock
	gmu     sync.Mutex // guards armed
	armed   bool
	reading chan struct{} // closed when the gated call has read the time
	release chan struct{}
}

func (g *gatedClock) Now() time.Time {
	now := g.fakeClock.Now()
	g.gmu.Lock()
	gated := g.armed
	g.armed = false
	g.gmu.Unlock()
	if gated {
		close(g.reading)
		<-g.release
	}
	return now
}

func (g *gatedClock) arm() {
	g.gmu.Lock()
	g.armed = true
	g.reading = make(chan struct{})
	g.release = make(chan struct{})
	g.gmu.Unlock()
}

// TestPutClockReadBeforeLock: Put reads the clock before it takes the
// shard's lock, so a Put may push an entry older than one another Put
// pushed meanwhile, onto the same key or onto another key of the shard.
// The key's stack must stay oldest first and the shard's watermark a lower
// bound anyway, or the connection that went idle first outlives
// IdleTimeout: a sweep that stops at the first entry not yet due, or that
// the watermark says is not due, leaves it, and a get hands it out.
func TestPutClockReadBeforeLock(t *testing.T) {
	for _, sameKey := range []bool{true, false} {
		t.Run(fmt.Sprintf("same_key_%v", sameKey), func(t *testing.T) {
			const timeout = time.Minute
			clk := &gatedClock{fakeClock: newClock()}
			p := New[string, *testConn](Config{MaxIdlePerKey: 4, IdleTimeout: timeout, Clock: clk.Now})
			defer p.Close()
			key := "a"
			if !sameKey {
				key = sameShardKey(p, "a")
			}
			first, second := newConn(1), newConn(2)
			clk.arm()
			done := make(chan bool)
			go func() { done <- p.Put(key, first) }() // reads t0, then waits
			<-clk.reading
			clk.Advance(time.Second)
			if !p.Put("a", second) { // t0+1s, pushed first
				t.Fatal("Put rejected")
			}
			close(clk.release)
			if !<-done {
				t.Fatal("Put rejected")
			}
			// first went idle at t0: at t0+timeout it is due, second is not.
			clk.Advance(timeout - time.Second)
			for {
				c, idleFor, ok := p.TryGet(key)
				if !ok {
					break
				}
				if idleFor >= timeout {
					t.Fatalf("TryGet returned conn %d idle for %v, IdleTimeout %v", c.id, idleFor, timeout)
				}
				c.Close()
				p.Release(key)
			}
			p.closers.Wait()
			if !first.isClosed() {
				t.Fatal("the conn idle for IdleTimeout was neither swept nor closed")
			}
		})
	}
}
