package idlepool

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSharedCapacityAndSlots(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 2})
	defer p.Close()
	dial(t, p, "h2", 0)
	first := &testShared{maxStreams: 2}
	p.AddShared("h2", first)
	if n := p.ConnsLen("h2"); n != 1 {
		t.Fatalf("ConnsLen = %d, want 1 (the dial slot moved to the shared conn)", n)
	}
	for i := range 2 {
		if s, ok := p.GetShared("h2"); !ok || s != first {
			t.Fatalf("GetShared #%d = %v %v", i, s, ok)
		}
	}
	if _, ok := p.GetShared("h2"); ok {
		t.Fatal("GetShared went past the stream limit")
	}
	// A second connection takes over when the first is full.
	dial(t, p, "h2", 0)
	second := &testShared{maxStreams: 1}
	p.AddShared("h2", second)
	if s, ok := p.GetShared("h2"); !ok || s != second {
		t.Fatalf("GetShared = %v %v, want the second conn", s, ok)
	}
	if n := p.ConnsLen("h2"); n != 2 {
		t.Fatalf("ConnsLen = %d, want 2", n)
	}
	// Unusable ones are dropped, not closed, and free their slot.
	first.mu.Lock()
	first.unusable = true
	first.mu.Unlock()
	second.mu.Lock()
	second.active = 0
	second.mu.Unlock()
	if s, ok := p.GetShared("h2"); !ok || s != second {
		t.Fatalf("GetShared = %v %v, want the second conn", s, ok)
	}
	if n := p.ConnsLen("h2"); n != 1 || first.isClosed() {
		t.Fatalf("ConnsLen = %d first closed = %v, want 1 false", n, first.isClosed())
	}
	p.RemoveShared("h2", second)
	p.RemoveShared("h2", second) // not pooled any more: no effect
	if n := p.ConnsLen("h2"); n != 0 {
		t.Fatalf("ConnsLen after RemoveShared = %d", n)
	}
	st := p.Stats()
	if st.SharedHits != 4 || st.SharedMisses != 1 || st.SharedDropped != 1 || st.Shared != 0 {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestAddSharedWakesWaiters(t *testing.T) {
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	defer p.Close()
	dial(t, p, "h2", 0)
	out := make(chan acquired)
	startWaiter(context.Background(), p, "h2", 1, out)
	startWaiter(context.Background(), p, "h2", 2, out)
	untilWaiters(t, p, "h2", 2)
	s := &testShared{maxStreams: 10}
	p.AddShared("h2", s)
	for range 2 {
		if r := <-out; !errors.Is(r.err, ErrSharedAvailable) {
			t.Fatalf("waiter got %+v, want ErrSharedAvailable", r)
		}
	}
	if got, ok := p.GetShared("h2"); !ok || got != s {
		t.Fatal("GetShared after the wake-up failed")
	}
	if n := p.ConnsLen("h2"); n != 1 {
		t.Fatalf("ConnsLen = %d, want 1", n)
	}
}

// valueShared has a non-comparable dynamic type.
type valueShared []*testShared

func (v valueShared) Close() error        { return v[0].Close() }
func (v valueShared) ReserveStream() bool { return v[0].ReserveStream() }
func (v valueShared) Usable() bool        { return v[0].Usable() }

func TestAddSharedBadInput(t *testing.T) {
	p := New[string, *testConn](Config{})
	defer p.Close()
	p.AddShared("k", nil) // ignored
	dial(t, p, "k", 0)
	inner := &testShared{maxStreams: 1}
	p.AddShared("k", valueShared{inner})
	if !inner.isClosed() || p.ConnsLen("k") != 0 {
		t.Fatal("a non-comparable SharedConn must be closed and its slot released")
	}
	p.RemoveShared("k", valueShared{inner}) // must not panic
	if _, ok := p.GetShared("k"); ok {
		t.Fatal("GetShared found something")
	}
}

func TestSharedIdleExpiry(t *testing.T) {
	clk := newClock()
	p := New[string, *testConn](Config{IdleTimeout: 10 * time.Second, Clock: clk.Now})
	defer p.Close()
	idle := &idleShared{testShared{maxStreams: 5, idleSince: clk.Now()}}
	busy := &idleShared{testShared{maxStreams: 5, idleSince: clk.Now()}}
	plain := &testShared{maxStreams: 5} // no IdleSince: never expired
	for _, k := range []string{"idle", "busy", "plain"} {
		dial(t, p, k, 0)
	}
	p.AddShared("idle", idle)
	p.AddShared("busy", busy)
	p.AddShared("plain", plain)
	if at, armed := p.expiry.deadline(); !armed || at != int64(10*time.Second) {
		t.Fatalf("timer at %v armed %v, want 10s", time.Duration(at), armed)
	}
	if s, ok := p.GetShared("busy"); !ok || s != busy {
		t.Fatal("GetShared(busy) failed")
	}
	clk.Advance(10 * time.Second)
	p.fire()
	if !idle.isClosed() || busy.isClosed() || plain.isClosed() {
		t.Fatalf("closed: idle %v busy %v plain %v, want true false false", idle.isClosed(), busy.isClosed(), plain.isClosed())
	}
	if p.ConnsLen("idle") != 0 || p.ConnsLen("busy") != 1 {
		t.Fatal("expired shared conn kept its slot, or the busy one lost it")
	}
	// busy is checked again a full timeout later.
	if at, _ := p.expiry.deadline(); at != int64(20*time.Second) {
		t.Fatalf("timer at %v, want 20s", time.Duration(at))
	}
	clk.Advance(2 * time.Second)
	busy.finishStream(clk.Now()) // idle from t=12s
	clk.Advance(8 * time.Second)
	p.fire() // t=20s: idle 8s, not yet
	if busy.isClosed() {
		t.Fatal("closed before its timeout")
	}
	if at, _ := p.expiry.deadline(); at != int64(22*time.Second) {
		t.Fatalf("timer at %v, want 22s", time.Duration(at))
	}
	clk.Advance(2 * time.Second)
	p.fire()
	if !busy.isClosed() || p.ConnsLen("busy") != 0 {
		t.Fatal("busy conn not expired after going idle")
	}
	if st := p.Stats(); st.SharedExpired != 2 || st.Shared != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

// stubbornShared claims to be idle but refuses CloseIfIdle, as a conn that
// had a stream reserved between the check and the close would.
type stubbornShared struct{ idleShared }

func (s *stubbornShared) CloseIfIdle() bool { return false }

func TestSharedExpiryRaceKeepsConn(t *testing.T) {
	clk := newClock()
	p := New[string, *testConn](Config{IdleTimeout: time.Second, Clock: clk.Now})
	defer p.Close()
	s := &stubbornShared{idleShared{testShared{maxStreams: 1, idleSince: clk.Now()}}}
	dial(t, p, "k", 0)
	p.AddShared("k", s)
	clk.Advance(time.Second)
	p.fire()
	if s.isClosed() || p.ConnsLen("k") != 1 {
		t.Fatal("a conn that refused CloseIfIdle was closed or lost its slot")
	}
	if got, ok := p.GetShared("k"); !ok || got != s {
		t.Fatal("the conn was not put back")
	}
}
