package altsvc

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fullPruneCache is a faithful small model of the design the seed replaced:
// one mutex for the whole cache, and every lookup first prunes every origin
// (including lookups for an absent origin). It is the baseline twin of
// BenchmarkLookup.
type fullPruneCache struct {
	mu      sync.Mutex // guards origins
	origins map[Origin]*[]modelAlt
}

type modelAlt struct {
	pub     Alternative
	expires int64
}

func (m *fullPruneCache) set(o Origin, alts []modelAlt) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.origins == nil {
		m.origins = make(map[Origin]*[]modelAlt)
	}
	m.origins[o] = &alts
}

func (m *fullPruneCache) Lookup(o Origin, dst []Alternative) []Alternative {
	now := processStartUnix + int64(time.Since(processStart)) // the same clock as Cache
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, alts := range m.origins {
		expired := false
		for i := range *alts {
			if now >= (*alts)[i].expires {
				expired = true
				break
			}
		}
		if !expired {
			continue
		}
		kept := (*alts)[:0]
		for _, a := range *alts {
			if now < a.expires {
				kept = append(kept, a)
			}
		}
		if len(kept) == 0 {
			delete(m.origins, key)
			continue
		}
		*alts = kept
	}
	if alts := m.origins[o]; alts != nil {
		for _, a := range *alts {
			dst = append(dst, a.pub)
		}
	}
	return dst
}

// lookuper is what both benchmarked designs offer.
type lookuper interface {
	Lookup(o Origin, dst []Alternative) []Alternative
}

type benchScenario struct {
	name      string
	origins   int // origins populated
	alts      int // alternatives per origin
	miss      bool
	shared    bool // 4 goroutines on one cache
	wantAlts  int
	lookupSet int // distinct origins looked up
}

var benchScenarios = []benchScenario{
	{name: "empty_miss", origins: 0, alts: 0, miss: true},
	{name: "single_hit", origins: 1, alts: 1},
	{name: "64_origins_hit", origins: 64, alts: 1},
	{name: "256_origins_hit", origins: 256, alts: 1},
	{name: "full_hit", origins: 256, alts: 8},
	{name: "full_miss", origins: 256, alts: 8, miss: true},
	{name: "shared_full_hit", origins: 256, alts: 8, shared: true},
	{name: "shared_full_miss", origins: 256, alts: 8, miss: true, shared: true},
}

func benchOrigin(b testing.TB, i int) Origin {
	o, err := NewOrigin("https", fmt.Sprintf("origin-%d.example.com", i), 443)
	if err != nil {
		b.Fatal(err)
	}
	return o
}

func benchServices(n int) []Service {
	svcs := make([]Service, n)
	for i := range svcs {
		svcs[i] = Service{Protocol: "h3", Port: uint16(8443 + i), MaxAge: DefaultMaxAge}
	}
	return svcs
}

// newBenchCache builds a populated Cache, or the full-prune model.
func newBenchCache(b *testing.B, sc benchScenario, fullPrune bool) lookuper {
	now := time.Now()
	if fullPrune {
		m := &fullPruneCache{}
		for i := 0; i < sc.origins; i++ {
			o := benchOrigin(b, i)
			alts := make([]modelAlt, sc.alts)
			for j := range alts {
				exp := now.Add(DefaultMaxAge)
				alts[j] = modelAlt{
					pub:     Alternative{Protocol: "h3", Host: o.Host(), Port: uint16(8443 + j), expires: exp.UnixNano()},
					expires: exp.UnixNano(),
				}
			}
			m.set(o, alts)
		}
		return m
	}
	c := New(Options{})
	for i := 0; i < sc.origins; i++ {
		if err := c.Update(benchOrigin(b, i), Header{Services: benchServices(sc.alts)}, 0); err != nil {
			b.Fatal(err)
		}
	}
	if c.Len() != sc.origins {
		b.Fatalf("populated %d origins, want %d", c.Len(), sc.origins)
	}
	return c
}

// lookupKeys returns the origins the loop cycles through (a power of two).
func lookupKeys(b *testing.B, sc benchScenario) []Origin {
	n := 256
	if sc.origins > 0 && sc.origins < n && !sc.miss {
		n = sc.origins
	}
	if sc.origins == 1 {
		n = 1
	}
	keys := make([]Origin, 0, 256)
	for i := 0; len(keys) < 256; i++ {
		if sc.miss {
			keys = append(keys, benchOrigin(b, 100000+i))
		} else {
			keys = append(keys, benchOrigin(b, i%n))
		}
	}
	return keys
}

func runLookupBench(b *testing.B, fullPrune bool) {
	for _, sc := range benchScenarios {
		b.Run(sc.name, func(b *testing.B) {
			c := newBenchCache(b, sc, fullPrune)
			keys := lookupKeys(b, sc)
			want := sc.alts
			if sc.miss {
				want = 0
			}
			b.ReportAllocs()
			if !sc.shared {
				dst := make([]Alternative, 0, MaxAlternatives)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					dst = c.Lookup(keys[i&255], dst[:0])
					if len(dst) != want {
						b.Fatalf("lookup found %d alternatives, want %d", len(dst), want)
					}
				}
				return
			}
			if runtime.GOMAXPROCS(0) != 2 {
				b.Logf("GOMAXPROCS=%d: shared runs %d goroutines", runtime.GOMAXPROCS(0), 2*runtime.GOMAXPROCS(0))
			}
			b.SetParallelism(2) // 4 goroutines with GOMAXPROCS 2
			var bad atomic.Int64
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				dst := make([]Alternative, 0, MaxAlternatives)
				i := int(next.Add(67)) // each goroutine starts elsewhere
				for pb.Next() {
					dst = c.Lookup(keys[i&255], dst[:0])
					if len(dst) != want {
						bad.Add(1)
					}
					i++
				}
			})
			if n := bad.Load(); n > 0 {
				b.Fatalf("%d lookups found the wrong number of alternatives", n)
			}
		})
	}
}

// BenchmarkLookup measures Cache.Lookup, which prunes only the requested
// origin and reads a lock-free snapshot.
func BenchmarkLookup(b *testing.B) { runLookupBench(b, false) }

// BenchmarkLookupFullPrune is the baseline twin: the prune-everything lookup
// under one mutex.
func BenchmarkLookupFullPrune(b *testing.B) { runLookupBench(b, true) }

// BenchmarkUsable measures the transport's per-request question.
func BenchmarkUsable(b *testing.B) {
	c := New(Options{})
	for i := 0; i < 256; i++ {
		if err := c.Update(benchOrigin(b, i), Header{Services: benchServices(8)}, 0); err != nil {
			b.Fatal(err)
		}
	}
	keys := lookupKeys(b, benchScenario{origins: 256})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := c.Usable(keys[i&255], "h3"); !ok {
			b.Fatal("no usable h3 alternative")
		}
	}
}

// BenchmarkUpdateFromResponse measures a response repeating the header
// already cached (the common case) against a changed header that must be
// parsed.
func BenchmarkUpdateFromResponse(b *testing.B) {
	o := benchOrigin(b, 1)
	for _, tc := range []struct {
		name    string
		changed bool
	}{{"unchanged", false}, {"changed", true}} {
		b.Run(tc.name, func(b *testing.B) {
			c := New(Options{})
			vals := [2][]string{{`h3=":443"; ma=86400, h3-29=":443"; ma=86400`}, {`h3=":8443"; ma=3600`}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				v := vals[0]
				if tc.changed {
					v = vals[i&1]
				}
				if err := c.UpdateFromResponse(o, v, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
