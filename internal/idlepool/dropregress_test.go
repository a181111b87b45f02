package idlepool

import (
	"fmt"
	"testing"
	"time"
)

// TestReleaseAfterKeyDropped: a key whose idle connections were Put
// without slots holds one slot for all of them (TestPutWithoutSlotCountsOne),
// so CloseIdle and a sweep release more slots than the key holds. The
// release that empties the key drops it from its shard's table; the ones
// after it must leave the table alone (they used to look for the dropped
// key in the table forever, holding the shard's lock).
func TestReleaseAfterKeyDropped(t *testing.T) {
	for _, path := range []string{"CloseIdle", "sweep"} {
		t.Run(path, func(t *testing.T) {
			clk := newClock()
			p := New[string, *testConn](Config{MaxIdlePerKey: 3, IdleTimeout: time.Minute, Clock: clk.Now})
			conns := []*testConn{newConn(1), newConn(2), newConn(3)}
			for _, c := range conns {
				if !p.Put("a", c) {
					t.Fatal("Put rejected")
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if path == "CloseIdle" {
					p.CloseIdle()
					return
				}
				clk.Advance(2 * time.Minute)
				if _, _, ok := p.TryGet("a"); ok {
					t.Error("TryGet returned an expired conn")
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				// No Close: it would wait for the shard's lock too.
				t.Fatalf("%s hung releasing the slots of a dropped key", path)
			}
			defer p.Close()
			p.closers.Wait()
			for _, c := range conns {
				if !c.isClosed() {
					t.Fatalf("conn %d not closed", c.id)
				}
			}
			if n := p.IdleLen("a"); n != 0 {
				t.Fatalf("IdleLen = %d, want 0", n)
			}
			// The key is usable again.
			c := newConn(4)
			if !p.Put("a", c) || p.IdleLen("a") != 1 {
				t.Fatal("Put after the key was dropped did not keep the conn")
			}
		})
	}
}

// TestPutAfterSweepDropsKey: a Put whose sweep expires every idle connection
// of a key filled without slots releases the key's last slot, which drops
// its state from the table. The Put used to push onto that dropped state:
// the connection was lost to the key (IdleLen 0) and sat on the shard's
// free list, where the next new key of the shard would have found it.
func TestPutAfterSweepDropsKey(t *testing.T) {
	clk := newClock()
	p := New[string, *testConn](Config{MaxIdlePerKey: 2, IdleTimeout: time.Minute, Clock: clk.Now})
	defer p.Close()
	old := newConn(1)
	if !p.Put("a", old) {
		t.Fatal("Put rejected")
	}
	clk.Advance(2 * time.Minute)
	fresh := newConn(2)
	if !p.Put("a", fresh) {
		t.Fatal("Put after expiry rejected")
	}
	p.closers.Wait()
	if !old.isClosed() {
		t.Fatal("expired conn not closed")
	}
	if n := p.IdleLen("a"); n != 1 {
		t.Fatalf("IdleLen = %d after the Put, want 1", n)
	}
	if c, _, ok := p.TryGet("a"); !ok || c != fresh {
		t.Fatalf("TryGet = %v, %v; want the conn just put", connID(c), ok)
	}
	// No other key of any shard finds it.
	for i := range 1000 {
		if c, _, ok := p.TryGet(fmt.Sprintf("other-%d", i)); ok {
			t.Fatalf("key other-%d got conn %d", i, c.id)
		}
	}
}

func connID(c *testConn) any {
	if c == nil {
		return nil
	}
	return c.id
}
