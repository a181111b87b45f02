package idlepool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// endStream frees one stream of s (what a finished request does).
func (s *testShared) endStream() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
}

// fullSharedKey returns a pool limited to one connection per key whose "k"
// holds one shared connection with every one of its maxStreams streams taken.
func fullSharedKey(t *testing.T, maxStreams int) (*Pool[string, *testConn], *testShared) {
	t.Helper()
	p := New[string, *testConn](Config{MaxConnsPerKey: 1})
	dial(t, p, "k", 0)
	s := &testShared{maxStreams: maxStreams}
	p.AddShared("k", s)
	for range maxStreams {
		if _, ok := p.GetShared("k"); !ok {
			t.Fatal("GetShared failed on a connection with free streams")
		}
	}
	return p, s
}

func TestStreamReleasedWakesOneWaiterInOrder(t *testing.T) {
	p, s := fullSharedKey(t, 1)
	defer p.Close()
	out := make(chan acquired)
	for i := range 3 {
		startWaiter(context.Background(), p, "k", i, out)
		untilWaiters(t, p, "k", i+1)
	}
	for want := range 3 {
		s.endStream()
		p.StreamReleased("k")
		r := <-out
		if r.who != want || !errors.Is(r.err, ErrSharedAvailable) {
			t.Fatalf("release %d woke %+v, want waiter %d with ErrSharedAvailable", want, r, want)
		}
		if n := waitersLen(p, "k"); n != 2-want {
			t.Fatalf("after release %d: %d waiters, want %d", want, n, 2-want)
		}
		if _, ok := p.GetShared("k"); !ok {
			t.Fatal("the woken waiter found no stream")
		}
	}
}

func TestAcquireTurnLooksAgainAfterARelease(t *testing.T) {
	tests := []struct {
		name     string
		between  func(p *Pool[string, *testConn], s *testShared) // after the miss, before AcquireTurn
		wantWait bool
	}{
		{"nothing happened: waits", func(*Pool[string, *testConn], *testShared) {}, true},
		{"stream released: looks again", func(p *Pool[string, *testConn], s *testShared) {
			s.endStream()
			p.StreamReleased("k")
		}, false},
		{"connection added: looks again", func(p *Pool[string, *testConn], s *testShared) {
			p.AddShared("k", &testShared{maxStreams: 1})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, s := fullSharedKey(t, 1)
			defer p.Close()
			var turn Turn
			if _, ok := p.GetSharedTurn("k", &turn); ok {
				t.Fatal("GetSharedTurn found a stream on a full connection")
			}
			tt.between(p, s)
			// Bounded, so that a wait that should not happen fails the test.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, _, _, err := p.AcquireTurn(ctx, "k", &turn)
				done <- err
			}()
			if !tt.wantWait {
				if err := <-done; !errors.Is(err, ErrSharedAvailable) {
					t.Fatalf("AcquireTurn = %v, want ErrSharedAvailable without waiting", err)
				}
				return
			}
			untilWaiters(t, p, "k", 1)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("AcquireTurn = %v, want context.Canceled", err)
			}
		})
	}
}

func TestWokenWaiterThatLosesKeepsItsPlace(t *testing.T) {
	p, s := fullSharedKey(t, 1)
	defer p.Close()
	// Waiter 0 loops as the transport does; waiter 1 waits once.
	first := make(chan error, 1)
	woken := make(chan struct{}, 4)
	var turn Turn
	go func() {
		for {
			if _, ok := p.GetSharedTurn("k", &turn); ok {
				first <- nil
				return
			}
			_, _, _, err := p.AcquireTurn(context.Background(), "k", &turn)
			if !errors.Is(err, ErrSharedAvailable) {
				first <- err
				return
			}
			woken <- struct{}{}
		}
	}()
	untilWaiters(t, p, "k", 1)
	out := make(chan acquired, 1)
	startWaiter(context.Background(), p, "k", 1, out)
	untilWaiters(t, p, "k", 2)

	// A stream frees but a newcomer takes it before waiter 0 looks.
	s.endStream()
	if _, ok := p.GetShared("k"); !ok {
		t.Fatal("newcomer found no stream")
	}
	p.StreamReleased("k")
	<-woken
	untilWaiters(t, p, "k", 2) // waiter 0 lost and queued again
	s.endStream()
	p.StreamReleased("k")
	if err := <-first; err != nil {
		t.Fatalf("waiter 0: %v", err)
	}
	select {
	case r := <-out:
		t.Fatalf("waiter 1 was served before waiter 0: %+v", r)
	default:
	}
	if n := waitersLen(p, "k"); n != 1 {
		t.Fatalf("%d waiters left, want waiter 1", n)
	}
}

func TestCancelledWakeIsPassedOn(t *testing.T) {
	p, _ := fullSharedKey(t, 1)
	defer p.Close()
	// Queue w by hand so that it can be handed a wake-up and give up after,
	// which a real wait only does when its context ends at that instant.
	w := &waiter[*testConn]{ch: make(chan waitResult[*testConn], 1), seq: 1}
	sh, h := p.locate("k")
	sh.mu.Lock()
	ks := sh.lookupLocked(h, "k")
	ks.nextSeq = 1
	ks.pushWaiter(w)
	sh.mu.Unlock()
	out := make(chan acquired, 1)
	startWaiter(context.Background(), p, "k", 1, out)
	untilWaiters(t, p, "k", 2)
	p.StreamReleased("k") // reaches w
	p.giveUp("k", w)      // w does not use it
	if r := <-out; r.who != 1 || !errors.Is(r.err, ErrSharedAvailable) {
		t.Fatalf("next waiter got %+v, want ErrSharedAvailable", r)
	}
}

func TestStreamReleasedWithoutLimitDoesNothing(t *testing.T) {
	p := New[string, *testConn](Config{})
	defer p.Close()
	p.StreamReleased("nobody") // no key, no limit: no allocation, no panic
	if n := p.ConnsLen("nobody"); n != 0 {
		t.Fatalf("ConnsLen = %d, want 0", n)
	}
}

// TestNoLostWakeups runs requests the way the transport does (look for a
// stream, else wait, and look again when woken) against one shared
// connection with two streams and a limit of one connection, with streams
// ended from other goroutines at random moments: every request must get a
// stream, and none may wait forever.
func TestNoLostWakeups(t *testing.T) {
	for round := range 20 {
		p, s := fullSharedKey(t, 2)
		for range 2 { // the two streams fullSharedKey took end soon
			go func() { s.endStream(); p.StreamReleased("k") }()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var turn Turn
				for {
					if _, ok := p.GetSharedTurn("k", &turn); ok {
						s.endStream()
						p.StreamReleased("k")
						return
					}
					_, _, _, err := p.AcquireTurn(ctx, "k", &turn)
					if errors.Is(err, ErrSharedAvailable) {
						continue
					}
					errs <- err
					return
				}
			}()
		}
		wg.Wait()
		cancel()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: a request never got a stream: %v", round, err)
		}
		p.Close()
	}
}
