package altsvc

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// UpdateFromResponse applies the Alt-Svc header lines of a response from
// origin o (for example resp.Header.Values("Alt-Svc")); age is the
// response's Age (0 when absent), which shortens every `ma`.
//
// The alternatives replace those cached for o (broken marks of alternatives
// that stay are kept); `clear` removes them; an alternative whose ma does not
// exceed age is already stale and is not stored. With no values, or when
// every alternative is malformed, the cache is left as it was. The returned
// error joins one [*ParseError] per skipped alternative (alternatives beyond
// [MaxAlternatives] included); it wraps [ErrInvalidOrigin] for a zero o.
//
// Seeing the same values and age again for o is cheap: nothing is parsed, and
// the expiries are refreshed from the stored ma (at most once a second).
func (c *Cache) UpdateFromResponse(o Origin, values []string, age time.Duration) error {
	if o.host == "" {
		return fmt.Errorf("%w: zero Origin", ErrInvalidOrigin)
	}
	if len(values) == 0 {
		return nil
	}
	age = max(age, 0)
	now := c.now()
	c.reclaimExpired(now)
	if err, done := c.refreshUnchanged(o, values, age, now); done {
		return err
	}
	h, perr := Parse(values)
	if !h.Clear && len(h.Services) == 0 {
		return perr
	}
	recs, excess := buildRecords(o, h.Services, age, now)
	err := errors.Join(perr, excess)
	c.replace(o, recs, append([]string(nil), values...), age, err, now)
	return err
}

// Update applies an already parsed header for origin o, like
// [Cache.UpdateFromResponse] (age shortens every MaxAge). It returns an error
// wrapping [ErrInvalidOrigin] for a zero o, or joining a [*ParseError] per
// alternative beyond [MaxAlternatives].
func (c *Cache) Update(o Origin, h Header, age time.Duration) error {
	if o.host == "" {
		return fmt.Errorf("%w: zero Origin", ErrInvalidOrigin)
	}
	if !h.Clear && len(h.Services) == 0 {
		return nil
	}
	now := c.now()
	c.reclaimExpired(now)
	recs, excess := buildRecords(o, h.Services, max(age, 0), now)
	c.replace(o, recs, nil, 0, nil, now)
	return excess
}

// refreshUnchanged handles a header identical to the one last applied to o.
// done is false when the header differs and must be parsed.
func (c *Cache) refreshUnchanged(o Origin, values []string, age time.Duration, now int64) (err error, done bool) {
	s, h := c.shardOf(o)
	e := s.get(h, o)
	if e == nil {
		return nil, false
	}
	v := e.view.Load()
	if v.rawAge != age || !sameValues(v.raw, values) {
		return nil, false
	}
	if now-v.refreshedAt < refreshStep {
		return v.rawErr, true
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if e = s.get(h, o); e == nil {
		return nil, false
	}
	v = e.view.Load()
	if v.rawAge != age || !sameValues(v.raw, values) {
		return nil, false
	}
	nv := *v
	for i := range nv.n {
		a := &nv.buf[i]
		a.expires = addDuration(a.expires, time.Duration(now-v.refreshedAt))
	}
	nv.refreshedAt = now
	nv.minExpiry = math.MaxInt64
	for i := range nv.n {
		nv.minExpiry = min(nv.minExpiry, nv.buf[i].expires)
	}
	e.view.Store(&nv)
	s.lowerMinExpiry(nv.minExpiry)
	c.lowerWatermark(nv.minExpiry)
	return nv.rawErr, true
}

func sameValues(a, b []string) bool {
	if a == nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// buildRecords turns parsed services into records expiring relative to now,
// dropping stale ones and duplicates; services beyond MaxAlternatives are
// reported.
func buildRecords(o Origin, svcs []Service, age time.Duration, now int64) ([]Alternative, error) {
	recs := make([]Alternative, 0, min(len(svcs), MaxAlternatives))
	var errs []error
	for _, svc := range svcs {
		ttl := svc.MaxAge - age
		if ttl <= 0 {
			continue
		}
		host := svc.Host
		if host == "" {
			host = o.host
		}
		if hasTarget(recs, svc.Protocol, host, svc.Port) {
			continue
		}
		if len(recs) == MaxAlternatives {
			errs = append(errs, newParseError(svc.Protocol+"="+joinHostPort(host, int(svc.Port)),
				fmt.Sprintf("more than %d alternatives for one origin", MaxAlternatives)))
			continue
		}
		exp := addDuration(now, ttl)
		recs = append(recs, Alternative{
			Protocol: svc.Protocol, Host: host, Port: svc.Port, Persist: svc.Persist,
			expires: exp,
		})
	}
	return recs, errors.Join(errs...)
}

func hasTarget(recs []Alternative, p, host string, port uint16) bool {
	for i := range recs {
		if recs[i].sameTarget(p, host, port) {
			return true
		}
	}
	return false
}

// replace makes recs the alternatives of o (removing o when recs is empty),
// carrying over the broken marks of alternatives that stay.
func (c *Cache) replace(o Origin, recs []Alternative, raw []string, age time.Duration, rawErr error, now int64) {
	s, h := c.shardOf(o)
	s.mu.Lock()
	if e := s.get(h, o); e != nil {
		if len(recs) == 0 {
			s.remove(h, o)
			c.count.Add(-1)
			s.mu.Unlock()
			return
		}
		c.fillEntry(s, e, recs, raw, age, rawErr, now)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	c.admit(o, recs, raw, age, rawErr, now)
}

// fillEntry publishes recs as e's alternatives, carrying over the broken
// marks of the alternatives that stay; the caller holds s.mu.
func (c *Cache) fillEntry(s *shard, e *originEntry, recs []Alternative, raw []string, age time.Duration, rawErr error, now int64) {
	if old := e.view.Load(); old != nil {
		for i := range recs {
			r := &recs[i]
			for _, prev := range old.alts() {
				if prev.sameTarget(r.Protocol, r.Host, r.Port) {
					r.brokenUntil = prev.brokenUntil
					r.failures = prev.failures
					break
				}
			}
		}
	}
	v := newView(recs)
	v.raw, v.rawAge, v.rawErr, v.refreshedAt = raw, age, rawErr, now
	e.view.Store(v)
	e.touch(now)
	s.lowerMinExpiry(v.minExpiry)
	c.lowerWatermark(v.minExpiry)
}

// admit inserts a new origin, making room first when the cache is full:
// expired origins are reclaimed before the least recently used live origin
// is evicted.
func (c *Cache) admit(o Origin, recs []Alternative, raw []string, age time.Duration, rawErr error, now int64) {
	c.structMu.Lock()
	defer c.structMu.Unlock()
	s, h := c.shardOf(o)
	if s.get(h, o) == nil && c.count.Load() >= c.maxOrigins() {
		if now >= c.watermark.Load() {
			c.sweepLocked(now)
		}
		for c.count.Load() >= c.maxOrigins() && c.evictLRULocked() {
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.get(h, o); e != nil {
		c.fillEntry(s, e, recs, raw, age, rawErr, now)
		return
	}
	e := &originEntry{origin: o}
	c.fillEntry(s, e, recs, raw, age, rawErr, now) // published before it is indexed
	s.insert(h, e)
	c.count.Add(1)
}

// evictLRULocked removes the origin used least recently; c.structMu is held.
// It reports false when there was nothing to evict.
func (c *Cache) evictLRULocked() bool {
	var victim *originEntry
	var victimShard *shard
	for i := range c.shards {
		s := &c.shards[i]
		s.each(func(e *originEntry) {
			if victim == nil || e.lastUsed.Load() < victim.lastUsed.Load() {
				victim, victimShard = e, s
			}
		})
	}
	if victim == nil {
		return false
	}
	victimShard.mu.Lock()
	if victimShard.remove(originHash(victim.origin), victim.origin) {
		c.count.Add(-1)
	}
	victimShard.mu.Unlock()
	return true
}

// reclaimExpired removes every expired alternative and emptied origin of the
// whole cache, unless the watermark shows nothing can have expired.
func (c *Cache) reclaimExpired(now int64) {
	if now < c.watermark.Load() {
		return
	}
	c.structMu.Lock()
	defer c.structMu.Unlock()
	if now < c.watermark.Load() {
		return
	}
	c.sweepLocked(now)
}

// sweepLocked reclaims expired entries in every shard that may hold one and
// recomputes the watermark; c.structMu is held.
func (c *Cache) sweepLocked(now int64) {
	// Raise the watermark first: writers that insert from now on lower it
	// themselves, and everything inserted before is seen by the sweep below.
	c.watermark.Store(math.MaxInt64)
	for i := range c.shards {
		s := &c.shards[i]
		if now >= s.minExpiry.Load() {
			s.mu.Lock()
			m := int64(math.MaxInt64)
			removed := s.filter(func(e *originEntry) bool {
				e.dropExpired(now)
				v := e.view.Load()
				if v.n == 0 {
					return false
				}
				m = min(m, v.minExpiry)
				return true
			})
			c.count.Add(-int64(removed))
			s.minExpiry.Store(m)
			s.mu.Unlock()
		}
		c.lowerWatermark(s.minExpiry.Load())
	}
}

// lowerWatermark lowers c.watermark to t.
func (c *Cache) lowerWatermark(t int64) {
	for {
		w := c.watermark.Load()
		if t >= w || c.watermark.CompareAndSwap(w, t) {
			return
		}
	}
}

// addDuration returns now+d, saturating instead of overflowing.
func addDuration(now int64, d time.Duration) int64 {
	if d > 0 && now > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return now + int64(d)
}

// unixTime converts Unix nanoseconds to a UTC time; 0 is the zero time.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
