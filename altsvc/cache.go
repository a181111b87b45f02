package altsvc

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Sizes and granularities of the cache.
const (
	// DefaultMaxOrigins is the origin capacity of a Cache whose
	// Options.MaxOrigins is 0.
	DefaultMaxOrigins = 1000
	// MaxAlternatives bounds the alternatives kept per origin; further
	// alternatives of a header are skipped and reported.
	MaxAlternatives = 8

	// numShards spreads origins over independent locks so that lookups
	// from several goroutines do not contend.
	numShards = 32
	// recencyStep is the granularity of the LRU clock: a lookup rewrites an
	// origin's last-use time only when it moved by at least this much, which
	// keeps concurrent lookups of one origin from bouncing its cache line.
	recencyStep = int64(time.Millisecond)
	// refreshStep: an unchanged header seen again within this time of the
	// last refresh leaves the expiries alone (ma has one-second resolution).
	refreshStep = int64(time.Second)
)

// Options configures a [Cache]. The zero value is valid.
type Options struct {
	// MaxOrigins bounds the number of origins held; 0 means
	// DefaultMaxOrigins (1000). When a new origin arrives at a full cache,
	// expired origins are reclaimed first, then the least recently used
	// (looked up or updated; tracked at millisecond granularity) is evicted.
	MaxOrigins int
	// Clock returns the current time; nil means the system clock, read
	// monotonically from the process start (wall-clock steps do not move
	// expiries). Tests inject a fake clock. It is called outside the
	// cache's locks.
	Clock func() time.Time
}

// Alternative is a cached alternative service of one origin, as returned by
// [Cache.Lookup], [Cache.Usable] and [Cache.Snapshot]. The exported fields
// identify it (pass it back to [Cache.MarkBroken] or [Cache.MarkWorking]);
// the methods report its cache metadata. It is 56 bytes, so a lookup copies
// a whole origin's alternatives in a few cache lines.
type Alternative struct {
	// Protocol is the ALPN protocol id, for example "h3".
	Protocol string
	// Host is the host to connect to; the origin's own host when the
	// advertisement named none. The TLS certificate must still be verified
	// for the origin host.
	Host string
	// Port is the port to connect to.
	Port uint16
	// Persist is true for `persist=1`: the alternative survives
	// [Cache.NetworkChanged].
	Persist bool

	failures    int32 // consecutive MarkBroken calls since the last MarkWorking
	expires     int64 // Unix nanoseconds; live while now < expires
	brokenUntil int64 // Unix nanoseconds; broken while now < brokenUntil
}

// Expires returns when the alternative stops being valid (zero for an
// Alternative that did not come from a Cache).
func (a Alternative) Expires() time.Time { return unixTime(a.expires) }

// BrokenUntil returns when the alternative may be tried again after a
// failure; the zero time when it was never marked broken.
func (a Alternative) BrokenUntil() time.Time { return unixTime(a.brokenUntil) }

// BrokenAt reports whether the alternative is marked broken at time t.
func (a Alternative) BrokenAt(t time.Time) bool { return t.UnixNano() < a.brokenUntil }

// Failures returns the number of consecutive [Cache.MarkBroken] calls since
// the last [Cache.MarkWorking]; it sets the backoff.
func (a Alternative) Failures() int { return int(a.failures) }

func (a *Alternative) sameTarget(p, host string, port uint16) bool {
	return a.Port == port && a.Protocol == p && a.Host == host
}

// originEntry is one origin in the cache. Its alternatives are an immutable
// altView behind an atomic pointer: lookups load it without a lock, and
// writers (holding the owning shard's mu) publish a new view instead of
// changing the old one, so a lookup sees a whole state, before or after a
// write.
type originEntry struct {
	origin Origin
	view   atomic.Pointer[altView] // never nil once the entry is indexed
	// lastUsed is written by lookups (at most once per recencyStep), so it
	// shares the line every lookup reads anyway.
	lastUsed atomic.Int64 // Unix nanoseconds of the last use, for LRU eviction
}

// altView is one published state of an origin: its alternatives and the
// Alt-Svc values they came from. It is never modified after publication.
type altView struct {
	minExpiry int64 // earliest buf[:n] expiry; MaxInt64 when n is 0
	n         int
	buf       [MaxAlternatives]Alternative // preference order; buf[:n] are held

	// The Alt-Svc values last applied, so an identical header skips parsing.
	// raw is nil once the alternatives no longer reflect it (pruned, loaded,
	// network change); while it is set, every alternative expires at
	// refreshedAt plus its ma minus Age.
	raw         []string
	rawAge      time.Duration
	rawErr      error
	refreshedAt int64
}

// emptyView is published in an entry that leaves the cache, so that a lookup
// that found the entry just before finds nothing in it.
var emptyView = altView{minExpiry: math.MaxInt64}

// alts returns the alternatives held, in preference order.
func (v *altView) alts() []Alternative { return v.buf[:v.n] }

// newView builds a view holding alts (at most MaxAlternatives) without any
// recorded header.
func newView(alts []Alternative) *altView {
	v := new(altView)
	v.n = copy(v.buf[:], alts)
	v.minExpiry = math.MaxInt64
	for i := range v.n {
		v.minExpiry = min(v.minExpiry, v.buf[i].expires)
	}
	return v
}

// touch records a use at now (at recencyStep granularity).
func (e *originEntry) touch(now int64) {
	if now-e.lastUsed.Load() >= recencyStep {
		e.lastUsed.Store(now)
	}
}

// dropExpired publishes a view without the alternatives expired at now and
// reports whether any was removed; the caller holds the shard's mu.
func (e *originEntry) dropExpired(now int64) bool {
	v := e.view.Load()
	if now < v.minExpiry {
		return false
	}
	var kept [MaxAlternatives]Alternative
	n := 0
	for _, a := range v.alts() {
		if now < a.expires {
			kept[n] = a
			n++
		}
	}
	e.view.Store(newView(kept[:n]))
	return true
}

// Cache is an origin-scoped Alt-Svc cache. See the package documentation for
// its contract. It is safe for concurrent use by multiple goroutines and may
// be shared between transports.
//
// The zero Cache is ready to use with the default [Options]. A Cache must not
// be copied after first use.
type Cache struct {
	opts Options

	// structMu serialises structural work: admitting a new origin (so the
	// capacity bound is exact), evictions, whole-cache sweeps and network
	// changes. It is always taken before any shard.mu, never while one is
	// held.
	structMu sync.Mutex

	count atomic.Int64 // origins resident (live or not yet reclaimed)

	// watermark is a lower bound of every resident alternative's expiry, so
	// a write can tell in O(1) that a sweep would reclaim nothing. 0 (the
	// zero value) simply makes the first write sweep.
	watermark atomic.Int64

	shards [numShards]shard
}

// New returns a Cache configured by opts.
func New(opts Options) *Cache {
	return &Cache{opts: opts}
}

func (c *Cache) maxOrigins() int64 {
	if c.opts.MaxOrigins > 0 {
		return int64(c.opts.MaxOrigins)
	}
	return DefaultMaxOrigins
}

// processStart anchors the default clock: wall time at start plus the
// monotonic time elapsed since, which costs one monotonic clock read (about
// half of time.Now) and is immune to wall-clock steps.
var (
	processStart     = time.Now()
	processStartUnix = processStart.UnixNano()
)

// now returns the current time in Unix nanoseconds.
func (c *Cache) now() int64 {
	if c.opts.Clock != nil {
		return c.opts.Clock().UnixNano()
	}
	return processStartUnix + int64(time.Since(processStart))
}

func (c *Cache) shardOf(o Origin) (*shard, uint64) {
	h := originHash(o)
	return &c.shards[(h>>32)%numShards], h
}

// Lookup appends the live alternatives of origin o to dst, in the server's
// preference order, and returns the extended slice. Broken alternatives are
// included (see Alternative.BrokenUntil). It prunes the expired alternatives
// of o only and never scans other origins; it does not allocate when dst has
// room (MaxAlternatives entries always suffice) and takes no lock unless it
// prunes. A zero o finds nothing.
func (c *Cache) Lookup(o Origin, dst []Alternative) []Alternative {
	if o.host == "" {
		return dst
	}
	now := c.now()
	s, h := c.shardOf(o)
	e, v := c.liveView(s, h, o, now)
	if e == nil {
		return dst
	}
	if now < v.minExpiry {
		dst = append(dst, v.alts()...) // all live: one bulk copy
	} else {
		for _, a := range v.alts() {
			if now < a.expires {
				dst = append(dst, a)
			}
		}
	}
	e.touch(now)
	return dst
}

// Usable returns the first alternative of origin o, in preference order,
// whose protocol id is protocol and which is live and not marked broken: the
// question a transport asks on every https request (protocol "h3"). Like
// Lookup it prunes only o's expired alternatives, takes no lock unless it
// prunes, and does not allocate.
func (c *Cache) Usable(o Origin, protocol string) (Alternative, bool) {
	if o.host == "" || c.Empty() {
		return Alternative{}, false
	}
	now := c.now()
	s, h := c.shardOf(o)
	e, v := c.liveView(s, h, o, now)
	if e == nil {
		return Alternative{}, false
	}
	e.touch(now)
	for i := range v.n {
		a := &v.buf[i]
		if now < a.expires && now >= a.brokenUntil && a.Protocol == protocol {
			return *a, true
		}
	}
	return Alternative{}, false
}

// liveView returns o's entry and its current view, pruning o's expired
// alternatives first when its view holds any. e is nil when o is absent.
func (c *Cache) liveView(s *shard, h uint64, o Origin, now int64) (e *originEntry, v *altView) {
	e = s.get(h, o)
	if e == nil {
		return nil, nil
	}
	v = e.view.Load()
	if now < v.minExpiry {
		return e, v
	}
	c.pruneOrigin(s, h, o, now)
	if e = s.get(h, o); e == nil {
		return nil, nil
	}
	return e, e.view.Load()
}

// pruneOrigin drops o's expired alternatives, and o itself when none is left.
func (c *Cache) pruneOrigin(s *shard, h uint64, o Origin, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.get(h, o)
	if e == nil || !e.dropExpired(now) {
		return
	}
	if e.view.Load().n == 0 && s.remove(h, o) {
		c.count.Add(-1)
	}
}

// Empty reports whether the cache holds no origin at all, live or expired
// but not yet reclaimed: a lookup of any origin then finds nothing. It is
// one atomic load, for callers that would otherwise build an Origin for
// every request to a server that never advertised an alternative. An
// origin being added at the same moment may not be seen yet, as if the
// call had come just before it.
func (c *Cache) Empty() bool {
	return c.count.Load() == 0
}

// Len reclaims every expired entry and returns the number of origins that
// have live alternatives.
func (c *Cache) Len() int {
	c.reclaimExpired(c.now())
	return int(c.count.Load())
}

// Entry is one origin and its alternatives, as listed by [Cache.Snapshot].
type Entry struct {
	Origin       Origin
	Alternatives []Alternative
}

// Snapshot reclaims every expired entry and returns a copy of the cache's
// live contents, sorted by origin host then port. The copy is the caller's.
func (c *Cache) Snapshot() []Entry {
	now := c.now()
	c.reclaimExpired(now)
	out := make([]Entry, 0, c.count.Load())
	for i := range c.shards {
		c.shards[i].each(func(e *originEntry) {
			v := e.view.Load()
			ent := Entry{Origin: e.origin, Alternatives: make([]Alternative, 0, v.n)}
			for _, a := range v.alts() {
				if now < a.expires {
					ent.Alternatives = append(ent.Alternatives, a)
				}
			}
			if len(ent.Alternatives) > 0 {
				out = append(out, ent)
			}
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Origin, out[j].Origin
		if a.host != b.host {
			return a.host < b.host
		}
		return a.port < b.port
	})
	return out
}
