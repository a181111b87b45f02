package idlepool

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// waitState polls l's state until it equals want (a goroutine has gone to
// sleep, or taken the lock); the deadline is only a hang guard.
func waitState(t *testing.T, l *shardLock, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.state.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("lock state %#x, want %#x", l.state.Load(), want)
		}
		runtime.Gosched()
	}
}

// lockInGoroutine starts a goroutine that takes l, reports it on locked, and
// unlocks when release is closed.
func lockInGoroutine(l *shardLock) (locked chan struct{}, release chan struct{}, done chan struct{}) {
	locked, release, done = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		l.Lock()
		close(locked)
		<-release
		l.Unlock()
	}()
	return locked, release, done
}

func recvOrFail(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: timed out (a lost wake-up?)", what)
	}
}

// TestShardLockWakesSleeper: a goroutine that finds the lock held sleeps,
// and the Unlock wakes it; once it holds the lock, no wake-up flag or
// sleeper is left in the state.
func TestShardLockWakesSleeper(t *testing.T) {
	var l shardLock
	l.init()
	l.Lock()
	locked, release, done := lockInGoroutine(&l)
	waitState(t, &l, lockHeld+lockSleeper)
	l.Unlock()
	recvOrFail(t, locked, "sleeper did not get the lock")
	if got := l.state.Load(); got != lockHeld {
		t.Fatalf("state %#x after the woken waiter took the lock, want %#x", got, lockHeld)
	}
	close(release)
	recvOrFail(t, done, "sleeper did not finish")
	if got := l.state.Load(); got != 0 {
		t.Fatalf("state %#x after the last Unlock, want 0", got)
	}
}

// TestShardLockHandOff: in hand-off mode Unlock passes the lock to the
// sleeper without releasing it (an arriving goroutine cannot take it in
// between), and the last sleeper ends hand-off mode.
func TestShardLockHandOff(t *testing.T) {
	var l shardLock
	l.init()
	l.Lock()
	locked, release, done := lockInGoroutine(&l)
	waitState(t, &l, lockHeld+lockSleeper)
	l.state.Add(lockStarving) // what a waiter that waited too long does
	l.Unlock()
	recvOrFail(t, locked, "sleeper was not handed the lock")
	if got := l.state.Load(); got != lockHeld {
		t.Fatalf("state %#x after the hand-off, want %#x (held, normal mode, nobody asleep)", got, lockHeld)
	}
	if l.state.CompareAndSwap(0, lockHeld) {
		t.Fatal("the lock was free while handed to the sleeper")
	}
	close(release)
	recvOrFail(t, done, "sleeper did not finish")
	if got := l.state.Load(); got != 0 {
		t.Fatalf("state %#x after the last Unlock, want 0", got)
	}
}

// TestShardLockExcludes hammers one lock from many goroutines, in normal
// mode and with every waiter starving at once (hand-off mode whenever a
// woken waiter loses): the count comes out exact (the race detector checks
// the exclusion too) and nobody is left asleep.
func TestShardLockExcludes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		starveAfter time.Duration
	}{
		{"normal", time.Millisecond},
		{"starving", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer lockStarveAfter.Store(lockStarveAfter.Load())
			lockStarveAfter.Store(int64(tc.starveAfter))
			var l shardLock
			l.init()
			const goroutines, rounds = 8, 20000
			count, inside := 0, false
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range rounds {
						l.Lock()
						if inside {
							errs <- fmt.Errorf("two goroutines inside the lock")
							l.Unlock()
							return
						}
						inside = true
						count++
						if i%64 == 0 {
							runtime.Gosched() // sleep with the lock held now and then
						}
						inside = false
						l.Unlock()
					}
				}()
			}
			finished := make(chan struct{})
			go func() { wg.Wait(); close(finished) }()
			recvOrFail(t, finished, "goroutines did not finish")
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if count != goroutines*rounds {
				t.Fatalf("count %d, want %d", count, goroutines*rounds)
			}
			if got := l.state.Load(); got != 0 {
				t.Fatalf("state %#x at the end, want 0", got)
			}
		})
	}
}

func TestShardLockUnlockUnlocked(t *testing.T) {
	var l shardLock
	l.init()
	defer func() {
		if recover() == nil {
			t.Fatal("Unlock of an unlocked lock did not panic")
		}
	}()
	l.Unlock()
}
