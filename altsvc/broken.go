package altsvc

import (
	"math"
	"time"
)

// Backoff of broken alternatives: the first failure hides an alternative for
// BrokenBackoffBase, each further one doubles that, up to BrokenBackoffMax.
const (
	BrokenBackoffBase = 5 * time.Minute
	BrokenBackoffMax  = 48 * time.Hour
)

// Backoff returns how long an alternative is hidden after its n-th
// consecutive failure (n >= 1): 5m, 10m, 20m, ... capped at 48h. n < 1 gives 0.
func Backoff(n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := BrokenBackoffBase
	for i := 1; i < n && d < BrokenBackoffMax; i++ {
		d *= 2
	}
	return min(d, BrokenBackoffMax)
}

// MarkBroken records a failure of alternative alt of origin o (matched by
// Protocol, Host and Port, as returned by Lookup or Usable): it is hidden from
// [Cache.Usable] until the returned time, for [Backoff] of its failure count.
// ok is false when o has no such live alternative. The mark survives header
// updates that keep the alternative, and is forgotten by
// [Cache.MarkWorking], [Cache.NetworkChanged] or the alternative's expiry.
func (c *Cache) MarkBroken(o Origin, alt Alternative) (until time.Time, ok bool) {
	now := c.now()
	c.reclaimExpired(now)
	s, h := c.shardOf(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, v, i := findLive(s, h, o, alt, now)
	if e == nil {
		return time.Time{}, false
	}
	nv := *v
	a := &nv.buf[i]
	if a.failures < math.MaxInt32 {
		a.failures++
	}
	a.brokenUntil = addDuration(now, Backoff(int(a.failures)))
	e.view.Store(&nv)
	return unixTime(a.brokenUntil), true
}

// MarkWorking records a success of alternative alt of origin o: its broken
// mark and failure count are reset. It reports whether o has such a live
// alternative.
func (c *Cache) MarkWorking(o Origin, alt Alternative) bool {
	now := c.now()
	c.reclaimExpired(now)
	s, h := c.shardOf(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, v, i := findLive(s, h, o, alt, now)
	if e == nil {
		return false
	}
	if v.buf[i].failures != 0 || v.buf[i].brokenUntil != 0 {
		nv := *v
		nv.buf[i].resetBroken()
		e.view.Store(&nv)
	}
	return true
}

func (a *Alternative) resetBroken() {
	a.brokenUntil = 0
	a.failures = 0
}

// findLive returns o's entry, its view and the index in it of the live
// record for alt's target (e is nil when there is none); the caller holds
// s.mu.
func findLive(s *shard, h uint64, o Origin, alt Alternative, now int64) (e *originEntry, v *altView, i int) {
	if e = s.get(h, o); e == nil {
		return nil, nil, 0
	}
	v = e.view.Load()
	for i := range v.n {
		if a := &v.buf[i]; a.sameTarget(alt.Protocol, alt.Host, alt.Port) && now < a.expires {
			return e, v, i
		}
	}
	return nil, nil, 0
}

// NetworkChanged tells the cache the client moved to another network: every
// alternative without `persist=1` is dropped (RFC 7838 section 2.2), every
// broken mark is forgotten since it described the old network, and expired
// entries are reclaimed.
func (c *Cache) NetworkChanged() {
	now := c.now()
	c.structMu.Lock()
	defer c.structMu.Unlock()
	c.watermark.Store(math.MaxInt64)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		m := int64(math.MaxInt64)
		removed := s.filter(func(e *originEntry) bool {
			var kept [MaxAlternatives]Alternative
			n := 0
			for _, a := range e.view.Load().alts() {
				if a.Persist && now < a.expires {
					a.resetBroken()
					kept[n] = a
					n++
				}
			}
			if n == 0 {
				return false // filter publishes the empty view
			}
			v := newView(kept[:n])
			e.view.Store(v)
			m = min(m, v.minExpiry)
			return true
		})
		c.count.Add(-int64(removed))
		s.minExpiry.Store(m)
		s.mu.Unlock()
		c.lowerWatermark(m)
	}
}
