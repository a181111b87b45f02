package idlepool

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// benchKey has the shape of a transport connection key.
type benchKey struct {
	proxy, scheme, addr string
	onlyH1              bool
}

type benchConn struct{ closed bool }

func (c *benchConn) Close() error { c.closed = true; return nil }

var benchKeyCounts = []int{1, 64, 256, 10000}

const benchIdleTimeout = 90 * time.Second // DefaultTransport's

func benchKeys(n int) []benchKey {
	keys := make([]benchKey, n)
	for i := range keys {
		keys[i] = benchKey{scheme: "https", addr: fmt.Sprintf("host-%d.example.com:443", i)}
	}
	return keys
}

// perKey is how many idle conns each key starts with: enough that every
// parallel goroutine can hold one of the same key, so every get hits.
func perKey() int { return max(DefaultMaxIdlePerKey, runtime.GOMAXPROCS(0)) }

// newBenchPool returns a pool holding perKey() idle conns of every key,
// closed when b ends. Each leaf benchmark builds its own: only a leaf runs
// under its -cpu value, so a pool filled by the parent followed whatever
// GOMAXPROCS was set before, and with -cpu 4,2 the parallel-4 leaf had
// fewer conns per key than goroutines and missed.
func newBenchPool(b *testing.B, keys []benchKey) *Pool[benchKey, *benchConn] {
	p := New[benchKey, *benchConn](Config{MaxIdlePerKey: perKey(), IdleTimeout: benchIdleTimeout})
	b.Cleanup(func() { p.Close() })
	for _, k := range keys {
		for range perKey() {
			if !p.Put(k, &benchConn{}) {
				b.Fatal("pre-populating Put rejected")
			}
		}
	}
	b.ResetTimer() // the leaf's function runs once per b.N tried
	return p
}

// newBenchModel is newBenchPool for the model of net/http's pool.
func newBenchModel(b *testing.B, keys []benchKey) *globalMutexPool[benchKey] {
	p := newGlobalMutexPool[benchKey](0, perKey(), benchIdleTimeout)
	b.Cleanup(p.closeAll)
	for _, k := range keys {
		for range perKey() {
			if !p.put(&modelConn[benchKey]{key: k, pool: p}) {
				b.Fatal("pre-populating put rejected")
			}
		}
	}
	b.ResetTimer()
	return p
}

// nextKey walks the keys in a per-goroutine pseudo-random order.
func nextKey(state *uint64, n int) int {
	x := *state
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*state = x
	return int((x >> 32) * uint64(n) >> 32) // multiply-shift: no division
}

var seedCounter atomic.Uint64

// BenchmarkPool is the request's view: Acquire (an idle conn is there) then
// Put, on a pool pre-populated for every key. The key is hashed once per
// get+put, as the transport does (it keeps the KeyHash in its connection).
func BenchmarkPool(b *testing.B) {
	for _, n := range benchKeyCounts {
		b.Run(fmt.Sprintf("keys_%d", n), func(b *testing.B) {
			keys := benchKeys(n)
			ctx := context.Background()
			b.Run("serial", func(b *testing.B) {
				p := newBenchPool(b, keys)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					k := keys[i]
					if i++; i == n {
						i = 0
					}
					kh := p.Hash(k)
					c, _, reused, err := p.AcquireTurnHashed(ctx, k, kh, nil)
					if err != nil || !reused || c == nil {
						b.Fatalf("Acquire missed: reused=%v err=%v", reused, err)
					}
					if !p.PutHashed(k, kh, c) {
						b.Fatal("Put rejected")
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				p := newBenchPool(b, keys)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					state := seedCounter.Add(0x9E3779B97F4A7C15) | 1
					for pb.Next() {
						k := keys[nextKey(&state, n)]
						kh := p.Hash(k)
						c, _, reused, err := p.AcquireTurnHashed(ctx, k, kh, nil)
						if err != nil || !reused || c == nil {
							b.Errorf("Acquire missed: reused=%v err=%v", reused, err)
							return
						}
						if !p.PutHashed(k, kh, c) {
							b.Error("Put rejected")
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkPoolGlobalMutex is the same workload on the model of net/http's
// pool (model_test.go).
func BenchmarkPoolGlobalMutex(b *testing.B) {
	for _, n := range benchKeyCounts {
		b.Run(fmt.Sprintf("keys_%d", n), func(b *testing.B) {
			keys := benchKeys(n)
			b.Run("serial", func(b *testing.B) {
				p := newBenchModel(b, keys)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					k := keys[i]
					if i++; i == n {
						i = 0
					}
					c, ok := p.get(k)
					if !ok || c == nil {
						b.Fatal("get missed")
					}
					if !p.put(c) {
						b.Fatal("put rejected")
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				p := newBenchModel(b, keys)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					state := seedCounter.Add(0x9E3779B97F4A7C15) | 1
					for pb.Next() {
						k := keys[nextKey(&state, n)]
						c, ok := p.get(k)
						if !ok || c == nil {
							b.Error("get missed")
							return
						}
						if !p.put(c) {
							b.Error("put rejected")
							return
						}
					}
				})
			})
		})
	}
}
