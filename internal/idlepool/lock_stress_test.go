package idlepool

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lockWatchdog fails t, with a dump of every goroutine, when
// progress has not moved for stall (a lost wake-up, or an Unlock blocked on
// its send). It returns a stop function to call once the workers are done.
func lockWatchdog(t *testing.T, progress *atomic.Int64, done <-chan struct{}, stall time.Duration) {
	t.Helper()
	last, lastMove := progress.Load(), time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		if p := progress.Load(); p != last {
			last, lastMove = p, time.Now()
			continue
		}
		if time.Since(lastMove) > stall {
			var buf bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&buf, 2)
			t.Fatalf("no progress for %v (a lost wake-up or a blocked Unlock?)\n%s", stall, buf.String())
		}
	}
}

// lockCheckState reports a state word that breaks one of the lock's
// invariants, as seen in one atomic snapshot: the sleeper count is never
// negative; a woken waiter and hand-off mode never coexist (the waiter that
// sets hand-off mode clears lockWoken in the same CAS, and Unlock sets
// lockWoken only in normal mode); hand-off mode always has a sleeper to
// hand to (setting it adds the setter as a sleeper, and the receiver that
// takes the last sleeper clears it in the same Add); the requeued sleepers
// are some of the sleepers (both counts change in the same atomic step).
func lockCheckState(s int64) error {
	switch {
	case s < 0:
		return fmt.Errorf("state %#x: negative sleeper count", s)
	case s&lockWoken != 0 && s&lockStarving != 0:
		return fmt.Errorf("state %#x: woken and starving at once", s)
	case s&lockStarving != 0 && s < lockSleeper:
		return fmt.Errorf("state %#x: hand-off mode with nobody asleep", s)
	case (s&requeuedMask)/lockRequeued > s/lockSleeper:
		return fmt.Errorf("state %#x: more requeued sleepers than sleepers", s)
	}
	return nil
}

// TestPoolLockStress hammers one shardLock with many goroutines under
// several GOMAXPROCS values, starvation thresholds (1ms as in production,
// 0 and 20µs so that hand-off mode starts and ends all the time) and mixes
// of critical sections (tight loops that re-take the lock at once, sections
// that yield or sleep with the lock held). It checks exclusion with a plain
// counter and an inside flag (the race detector checks it too), samples the
// state word for broken invariants, fails through a watchdog when nothing
// moves for 10 s, and checks that the lock ends free with nobody asleep and
// no wake-up left in the channel.
func TestPoolLockStress(t *testing.T) {
	type mix struct {
		name string
		// section runs with the lock held; i is the goroutine's round.
		section func(g, i int)
	}
	mixes := []mix{
		{"tight", func(g, i int) {}},
		{"yield", func(g, i int) {
			if i%16 == g%16 {
				runtime.Gosched()
			}
		}},
		{"long_and_short", func(g, i int) {
			switch {
			case g%4 == 0 && i%32 == 0:
				time.Sleep(20 * time.Microsecond)
			case g%4 == 1:
				runtime.Gosched()
			}
		}},
	}
	for _, procs := range []int{1, 2, 8} {
		for _, starve := range []time.Duration{time.Millisecond, 20 * time.Microsecond, 0} {
			for _, m := range mixes {
				t.Run(fmt.Sprintf("procs_%d/starve_%v/%s", procs, starve, m.name), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					defer lockStarveAfter.Store(lockStarveAfter.Load())
					lockStarveAfter.Store(int64(starve))
					lockHammer(t, 24, 600, m.section)
				})
			}
		}
	}
}

func lockHammer(t *testing.T, goroutines, rounds int, section func(g, i int)) {
	t.Helper()
	var l shardLock
	l.init()
	var progress atomic.Int64
	count, inside := 0, false
	errs := make(chan error, goroutines+1)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				l.Lock()
				if inside {
					errs <- fmt.Errorf("goroutine %d round %d: two goroutines inside the lock", g, i)
					inside = false
					l.Unlock()
					return
				}
				inside = true
				count++
				section(g, i)
				inside = false
				l.Unlock()
				progress.Add(1)
			}
		}()
	}
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := lockCheckState(l.state.Load()); err != nil {
				errs <- err
				return
			}
			runtime.Gosched()
		}
	}()
	go func() { wg.Wait(); close(done) }()
	lockWatchdog(t, &progress, done, 10*time.Second)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if count != goroutines*rounds {
		t.Errorf("count %d, want %d", count, goroutines*rounds)
	}
	if got := l.state.Load(); got != 0 {
		t.Errorf("state %#x at the end, want 0", got)
	}
	if n := len(l.wake) + len(l.requeued); n != 0 {
		t.Errorf("%d wake-ups left in the channels at the end", n)
	}
}
