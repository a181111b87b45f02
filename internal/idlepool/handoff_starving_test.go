package idlepool

import (
	"runtime"
	"testing"
	"time"
)

// TestStarvingWaiterServedFirst: sync.Mutex puts a woken waiter
// that lost the lock again at the head of the queue (LIFO re-queue) and, once
// it has waited too long, switches to hand-off mode, so the next Unlock gives
// it the lock: its wait is bounded. With shardLock's
// waiters queued on one channel, FIFO only: the starving waiter re-queued
// behind every other sleeper, and the hand-off its own flag started went to
// the sleeper at the head, which ended hand-off mode when it had not itself
// waited long, so the starving waiter's wait was not bounded. A waiter that
// sleeps again now sleeps on a second channel that Unlock serves first.
//
// The schedule is forced with GOMAXPROCS 1: the unlocker re-takes the lock
// before the woken waiter S1 runs.
func TestStarvingWaiterServedFirst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer lockStarveAfter.Store(lockStarveAfter.Load())
	lockStarveAfter.Store(0) // every woken waiter counts as starving
	var l shardLock
	l.init()
	order := make(chan string, 2)
	lockAndRecord := func(name string, done chan struct{}) {
		defer close(done)
		l.Lock()
		order <- name
		l.Unlock()
	}
	l.Lock()
	s1Done, s2Done := make(chan struct{}), make(chan struct{})
	go lockAndRecord("S1", s1Done)
	waitState(t, &l, lockHeld+lockSleeper)
	go lockAndRecord("S2", s2Done)
	waitState(t, &l, lockHeld+2*lockSleeper)
	l.Unlock() // normal mode: wakes S1, which cannot run before the next line
	l.Lock()   // barges in ahead of the woken S1
	if got := l.state.Load(); got != lockHeld|lockWoken|lockSleeper {
		l.Unlock()
		<-s1Done
		<-s2Done
		t.Skipf("schedule not forced (state %#x)", got)
	}
	// S1 runs, finds the lock held, has waited "too long": it re-sleeps and
	// sets hand-off mode.
	deadline := time.Now().Add(10 * time.Second)
	for s := l.state.Load(); s&(lockHeld|lockStarving) != lockHeld|lockStarving || s/lockSleeper != 2; s = l.state.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("lock state %#x, want held, hand-off mode, two sleepers", s)
		}
		runtime.Gosched()
	}
	l.Unlock() // hand-off
	recvOrFail(t, s1Done, "S1 did not finish")
	recvOrFail(t, s2Done, "S2 did not finish")
	if first := <-order; first != "S1" {
		t.Errorf("hand-off went to %s first, want S1 (the waiter that started hand-off mode)", first)
	}
}
