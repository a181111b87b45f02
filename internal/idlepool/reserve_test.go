package idlepool

import (
	"context"
	"testing"
	"time"
)

// TestTryReserve checks the slot count TryReserve keeps with Acquire:
// it takes a free slot, refuses a full key (and so never overtakes a
// waiter), and its slot, once released, goes to the first waiter.
func TestTryReserve(t *testing.T) {
	tests := []struct {
		name     string
		maxConns int
		held     int // slots taken with Acquire first
		want     bool
	}{
		{"no limit", 0, 3, true},
		{"free slot", 2, 1, true},
		{"full", 2, 2, false},
		{"limit one, empty", 1, 0, true},
		{"limit one, full", 1, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New[string, *testConn](Config{MaxConnsPerKey: tt.maxConns})
			defer p.Close()
			for range tt.held {
				if _, _, _, err := p.Acquire(context.Background(), "k"); err != nil {
					t.Fatal(err)
				}
			}
			if got := p.TryReserve("k"); got != tt.want {
				t.Fatalf("TryReserve = %v, want %v", got, tt.want)
			}
			want := tt.held
			if tt.want {
				want++
			}
			if got := p.ConnsLen("k"); got != want {
				t.Fatalf("ConnsLen = %d, want %d", got, want)
			}
		})
	}
}

func TestTryReserveReleaseWakesWaiter(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	defer p.Close()
	if !p.TryReserve("k") {
		t.Fatal("TryReserve on an empty key failed")
	}
	if p.TryReserve("k") {
		t.Fatal("second TryReserve with a limit of 1 succeeded")
	}
	got := make(chan error, 1)
	go func() {
		_, _, reused, err := p.Acquire(context.Background(), "k")
		if err == nil && reused {
			err = context.Canceled // not expected: nothing was Put
		}
		got <- err
	}()
	for p.Waiting("k") != 1 {
		time.Sleep(time.Millisecond) // hang guard is the test timeout
	}
	if p.TryReserve("k") {
		t.Fatal("TryReserve overtook a waiter")
	}
	p.Release("k")
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if n := p.Waiting("k"); n != 0 {
		t.Fatalf("Waiting = %d after the hand-over", n)
	}
	if n := p.ConnsLen("k"); n != 1 {
		t.Fatalf("ConnsLen = %d, want 1 (the waiter's dial)", n)
	}
}

func TestTryReserveClosedPool(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	p.Close()
	if p.TryReserve("k") {
		t.Fatal("TryReserve succeeded on a closed pool")
	}
	if n := p.Waiting("k"); n != 0 {
		t.Fatalf("Waiting = %d", n)
	}
}
