package idlepool

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolUnderHandOff drives a pool through its shard locks
// with hand-off mode forced (lockStarveAfter 0) and as in production, under
// GOMAXPROCS 1, 2 and 8: goroutines Acquire a key (with a per-key connection
// limit, so some wait), count how many hold a connection of the key at once,
// and Put it back. The limit must never be exceeded (the pool's state stays
// consistent under the lock), every Acquire must return (the watchdog fails
// after 10 s without progress), and every connection ends idle or closed.
func TestPoolUnderHandOff(t *testing.T) {
	const limit = 2
	for _, procs := range []int{1, 2, 8} {
		for _, starve := range []time.Duration{time.Millisecond, 0} {
			for _, keys := range []int{1, 3} {
				t.Run(fmt.Sprintf("procs_%d/starve_%v/keys_%d", procs, starve, keys), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					defer lockStarveAfter.Store(lockStarveAfter.Load())
					lockStarveAfter.Store(int64(starve))
					p := New[string, *testConn](Config{MaxConnsPerKey: limit, MaxIdlePerKey: limit})
					defer p.Close()
					inUse := make([]atomic.Int32, keys)
					var progress, nextID atomic.Int64
					errs := make(chan error, 32)
					var wg sync.WaitGroup
					for g := range 16 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := range 300 {
								k := (g + i) % keys
								key := fmt.Sprint("k", k)
								c, _, reused, err := p.Acquire(context.Background(), key)
								if err != nil {
									errs <- fmt.Errorf("Acquire: %w", err)
									return
								}
								if !reused {
									c = newConn(int(nextID.Add(1)))
								}
								if n := inUse[k].Add(1); n > limit {
									errs <- fmt.Errorf("key %s: %d connections in use, limit %d", key, n, limit)
								}
								if i%8 == 0 {
									runtime.Gosched()
								}
								inUse[k].Add(-1)
								p.Put(key, c)
								progress.Add(1)
							}
						}()
					}
					done := make(chan struct{})
					go func() { wg.Wait(); close(done) }()
					lockWatchdog(t, &progress, done, 10*time.Second)
					close(errs)
					for err := range errs {
						t.Error(err)
					}
					for i := range p.shards {
						if s := p.shards[i].mu.state.Load(); s != 0 {
							t.Errorf("shard %d lock state %#x at the end, want 0", i, s)
						}
					}
				})
			}
		}
	}
}
