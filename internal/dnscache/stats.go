package dnscache

import "sync/atomic"

// Stats is a snapshot of a Cache's counters since New.
type Stats struct {
	// Hits counts lookups answered from a fresh entry (negative ones too).
	Hits uint64
	// Misses counts lookups that made a resolver call themselves.
	Misses uint64
	// Coalesced counts lookups that waited for another caller's resolver
	// call instead of making one.
	Coalesced uint64
	// StaleServed counts lookups answered with an expired answer while a
	// refresh ran.
	StaleServed uint64
	// Refreshes counts background refreshes started; RefreshErrors those
	// that failed (the stale answer was kept).
	Refreshes, RefreshErrors uint64
	// Errors counts lookups that returned an error (cached failures,
	// resolver failures and callers whose context ended).
	Errors uint64
	// Evictions counts entries removed to make room.
	Evictions uint64
	// Entries is the number of names held now.
	Entries int
}

// counters are the atomic counters behind Stats.
type counters struct {
	hits, misses, coalesced, staleServed atomic.Uint64
	refreshes, refreshErrors, errors     atomic.Uint64
	evictions                            atomic.Uint64
}

// Stats returns a snapshot of the counters; counters are read one by one,
// so a snapshot taken under load need not be mutually consistent.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	n := len(c.entries)
	c.mu.RUnlock()
	return Stats{
		Hits:          c.stats.hits.Load(),
		Misses:        c.stats.misses.Load(),
		Coalesced:     c.stats.coalesced.Load(),
		StaleServed:   c.stats.staleServed.Load(),
		Refreshes:     c.stats.refreshes.Load(),
		RefreshErrors: c.stats.refreshErrors.Load(),
		Errors:        c.stats.errors.Load(),
		Evictions:     c.stats.evictions.Load(),
		Entries:       n,
	}
}
