package dnscache

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestEvictionMatchesScan stores random answers (fresh, stale-served and
// failed, some replacing a name's entry) into a small full cache on a
// moving clock, and checks after every store that the cache holds exactly
// what the defining rule leaves: on an insert into a full cache, every
// entry past its end (the later of expires and staleUntil) goes, or if none
// is, the one whose end is soonest; a replaced name keeps only its new
// entry. The rule is applied by a plain scan of a reference map.
func TestEvictionMatchesScan(t *testing.T) {
	const maxEntries, names, steps = 16, 40, 20000
	rng := rand.New(rand.NewPCG(1, 2))
	c := New(Config{MaxEntries: maxEntries, TTL: time.Second})
	type ref struct{ end time.Time }
	model := map[string]ref{}
	now := time.Unix(1e9, 0)
	evictions := 0
	for step := range steps {
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		key := fmt.Sprintf("n%d.test", rng.IntN(names))
		// Distinct ends (a nanosecond apart at least) so that "soonest" is
		// one entry for the scan and the heap alike.
		e := &entry{expires: now.Add(time.Duration(rng.IntN(5000))*time.Millisecond + time.Duration(step))}
		switch rng.IntN(3) {
		case 0: // a failure: no stale window
		case 1:
			e.staleUntil = e.expires.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		case 2:
			e.staleUntil = e.expires
		}
		end := e.expires
		if e.staleUntil.After(end) {
			end = e.staleUntil
		}
		if _, ok := model[key]; !ok && len(model) >= maxEntries {
			removed := 0
			var oldest string
			for k, r := range model {
				if !now.Before(r.end) {
					delete(model, k)
					removed++
				} else if oldest == "" || r.end.Before(model[oldest].end) {
					oldest = k
				}
			}
			if removed == 0 {
				delete(model, oldest)
				removed++
			}
			evictions += removed
		}
		model[key] = ref{end}
		c.store(key, e, now)

		if len(c.entries) != len(model) || len(c.byEnd) != len(model) {
			t.Fatalf("step %d: %d entries, %d in the heap, want %d", step, len(c.entries), len(c.byEnd), len(model))
		}
		for k, r := range model {
			got := c.entries[k]
			if got == nil || !got.end().Equal(r.end) {
				t.Fatalf("step %d: %s is %+v, want end %v", step, k, got, r.end)
			}
		}
		for i, e := range c.byEnd {
			if e.heapIdx != i || c.entries[e.key] != e {
				t.Fatalf("step %d: heap slot %d holds %s with index %d, not its current entry", step, i, e.key, e.heapIdx)
			}
		}
	}
	if got := c.Stats().Evictions; got != uint64(evictions) || evictions < steps/10 {
		t.Fatalf("%d evictions counted, %d by the rule (want many)", got, evictions)
	}
}

// BenchmarkStoreIntoFullCache: a new name stored into a cache holding
// DefaultMaxEntries live names, so that each store evicts one (what every
// lookup of a new name costs once a client has seen that many hosts; it
// runs under the cache's write lock, which every lookup's read waits on).
func BenchmarkStoreIntoFullCache(b *testing.B) {
	c := New(Config{})
	now := time.Unix(1e9, 0)
	keys := make([]string, DefaultMaxEntries*4)
	for i := range keys {
		keys[i] = fmt.Sprintf("o%d.test", i)
	}
	i := 0
	store := func() {
		now = now.Add(time.Microsecond)
		e := &entry{expires: now.Add(DefaultTTL)}
		e.staleUntil = e.expires.Add(DefaultTTL)
		c.store(keys[i%len(keys)], e, now)
		i++
	}
	for range DefaultMaxEntries {
		store()
	}
	b.ReportAllocs()
	for b.Loop() {
		store()
	}
}
