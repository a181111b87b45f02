package idlepool

import (
	"context"
	"fmt"
	"runtime"
	"strings"
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

// benchKeySet is n distinct keys, built on demand from one string holding
// every key's address at a fixed width. A transport builds its key from the
// request in hand, so the key a get looks up is in cache and only the pool's
// own state is not. Reading keys from a []benchKey instead (560 KB for
// 10,000 keys, each pointing to its own allocated address) put two
// dependent loads over 880 KB before every get, and the 10,000-key rows
// measured those misses as much as the pool's. Here the key's bytes, which
// the hash still reads, come from 260 KB laid out in order.
type benchKeySet struct {
	addrs string // every key's address, width bytes each, key 0 first
	width int
	n     int
}

const benchAddrFormat = "host-%05d.example.com:443"

func benchKeys(n int) benchKeySet {
	if n > 99999 {
		panic("benchKeys: addresses have five digits")
	}
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, benchAddrFormat, i)
	}
	return benchKeySet{addrs: sb.String(), width: len(fmt.Sprintf(benchAddrFormat, 0)), n: n}
}

// at returns key i, 0 <= i < n.
func (s benchKeySet) at(i int) benchKey {
	return benchKey{scheme: "https", addr: s.addrs[i*s.width : (i+1)*s.width]}
}

// perKey is how many idle conns each key starts with: enough that every
// parallel goroutine can hold one of the same key, so every get hits.
func perKey() int { return max(DefaultMaxIdlePerKey, runtime.GOMAXPROCS(0)) }

// newBenchPool returns a pool holding perKey() idle conns of every key,
// closed when b ends. Each leaf benchmark builds its own: only a leaf runs
// under its -cpu value, so a pool filled by the parent followed whatever
// GOMAXPROCS was set before, and with -cpu 4,2 the parallel-4 leaf had
// fewer conns per key than goroutines and missed.
func newBenchPool(b *testing.B, keys benchKeySet) *Pool[benchKey, *benchConn] {
	p := New[benchKey, *benchConn](Config{MaxIdlePerKey: perKey(), IdleTimeout: benchIdleTimeout})
	b.Cleanup(func() { p.Close() })
	for i := range keys.n {
		k := keys.at(i)
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
func newBenchModel(b *testing.B, keys benchKeySet) *globalMutexPool[benchKey] {
	p := newGlobalMutexPool[benchKey](0, perKey(), benchIdleTimeout)
	b.Cleanup(p.closeAll)
	for i := range keys.n {
		k := keys.at(i)
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
					k := keys.at(i)
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
						k := keys.at(nextKey(&state, n))
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
					k := keys.at(i)
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
						k := keys.at(nextKey(&state, n))
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

// TestBenchKeys: the benchmark's key set holds n distinct keys, key i
// naming host i, so a keys_10000 row really spreads over 10,000 keys.
func TestBenchKeys(t *testing.T) {
	keys := benchKeys(10000)
	seen := make(map[benchKey]int, keys.n)
	for i := range keys.n {
		k := keys.at(i)
		if want := fmt.Sprintf(benchAddrFormat, i); k.addr != want || k.scheme != "https" {
			t.Fatalf("key %d is %+v, want address %q", i, k, want)
		}
		if j, dup := seen[k]; dup {
			t.Fatalf("keys %d and %d are equal", j, i)
		}
		seen[k] = i
	}
}
