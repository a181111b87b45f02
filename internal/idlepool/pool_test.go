package idlepool

import (
	"context"
	"testing"
)

func TestLIFO(t *testing.T) {
	p := New[string, *testConn](Config{MaxIdlePerKey: 3})
	defer p.Close()
	ctx := context.Background()
	conns := []*testConn{newConn(1), newConn(2), newConn(3)}
	for range conns {
		if _, _, reused, err := p.Acquire(ctx, "a"); err != nil || reused {
			t.Fatalf("Acquire on empty pool: reused=%v err=%v", reused, err)
		}
	}
	for _, c := range conns {
		if !p.Put("a", c) {
			t.Fatalf("Put(%d) rejected", c.id)
		}
	}
	for _, want := range []int{3, 2, 1} {
		c, _, reused, err := p.Acquire(ctx, "a")
		if err != nil || !reused || c.id != want {
			t.Fatalf("Acquire = %v reused=%v err=%v, want conn %d", c, reused, err, want)
		}
	}
}
