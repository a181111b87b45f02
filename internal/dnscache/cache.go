package dnscache

import (
	"context"
	"net"
	"net/http/httptrace"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults for the zero Config fields.
const (
	// DefaultTTL is how long a positive answer is fresh. 30s follows common
	// resolver practice for client-side caches: short enough that a DNS
	// change (failover, rolling deploys behind a name) is seen within one
	// idle-connection lifetime, long enough that a busy client resolves a
	// name twice a minute instead of on every dial. Go's resolver does not
	// expose record TTLs, so the cache cannot honour them.
	DefaultTTL = 30 * time.Second
	// DefaultNegativeTTL is how long a failure is remembered: short, so a
	// name that comes back is usable almost at once, but enough to stop a
	// burst of requests to a dead name from each paying a lookup.
	DefaultNegativeTTL = time.Second
	// DefaultMaxEntries bounds the names held.
	DefaultMaxEntries = 4096
	// DefaultLookupTimeout bounds one shared resolver call.
	DefaultLookupTimeout = 15 * time.Second
)

// Config configures a Cache. The zero Config is usable: the system resolver,
// DefaultTTL, DefaultNegativeTTL, DefaultMaxEntries, time.Now.
type Config struct {
	// Resolver performs lookups. nil means net.DefaultResolver, so
	// /etc/hosts, nsswitch and resolv.conf keep working as in net/http.
	Resolver *net.Resolver
	// TTL is how long a positive answer is served without asking again.
	// 0 means DefaultTTL; negative disables caching altogether (answers and
	// failures), while concurrent lookups are still coalesced.
	TTL time.Duration
	// NegativeTTL is how long a failed lookup is remembered. 0 means
	// DefaultNegativeTTL; negative disables caching failures.
	NegativeTTL time.Duration
	// MaxStale is how long after TTL an answer may still be served while a
	// background refresh runs. 0 means the same as TTL; negative disables
	// serving stale answers (an expired entry is a miss).
	MaxStale time.Duration
	// MaxEntries bounds the number of names held. 0 means
	// DefaultMaxEntries; negative values are treated as 0.
	MaxEntries int
	// LookupTimeout bounds one shared resolver call, which runs on its own
	// context so one caller's cancellation cannot fail the others. 0 means
	// DefaultLookupTimeout.
	LookupTimeout time.Duration
	// Clock returns the current time; nil means time.Now. Tests inject one.
	Clock func() time.Time
}

// Cache is a DNS cache; create it with New. It is safe for concurrent use.
type Cache struct {
	resolver      *net.Resolver
	ttl           time.Duration
	negativeTTL   time.Duration
	maxStale      time.Duration
	maxEntries    int
	lookupTimeout time.Duration
	clock         func() time.Time

	group singleflight.Group
	// refreshes tracks background refresh goroutines (tests wait on it).
	refreshes sync.WaitGroup

	// mu guards entries (the map itself; entries are immutable once stored,
	// apart from their atomic refreshing flag and their heapIdx) and byEnd.
	mu      sync.RWMutex
	entries map[string]*entry
	byEnd   byEnd // the entries, soonest end first (evict.go)

	stats counters

	// testHookJoined, when set (tests only), runs after a caller has joined
	// a shared lookup and before it waits for the answer.
	testHookJoined func(key string)
}

// entry is one name's answer. Fields other than refreshing and heapIdx
// never change after the entry is stored; an update stores a new entry.
type entry struct {
	addrs      []netip.Addr
	err        error     // non-nil for a cached failure
	expires    time.Time // served as fresh before this
	staleUntil time.Time // served stale (refreshing) before this
	retryAt    time.Time // no refresh starts before this (after a failed one)
	refreshing atomic.Bool

	key string // set by setLocked before the entry is published
	// heapIdx is the entry's index in Cache.byEnd; Cache.mu guards it.
	heapIdx int
}

// New returns a Cache configured by cfg (see Config for the zero values).
func New(cfg Config) *Cache {
	c := &Cache{
		resolver:      cfg.Resolver,
		ttl:           cfg.TTL,
		negativeTTL:   cfg.NegativeTTL,
		maxStale:      cfg.MaxStale,
		maxEntries:    cfg.MaxEntries,
		lookupTimeout: cfg.LookupTimeout,
		clock:         cfg.Clock,
		entries:       make(map[string]*entry),
	}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	if c.ttl == 0 {
		c.ttl = DefaultTTL
	}
	if c.negativeTTL == 0 {
		c.negativeTTL = DefaultNegativeTTL
	}
	if c.maxStale == 0 {
		c.maxStale = c.ttl
	}
	if c.maxEntries <= 0 {
		c.maxEntries = DefaultMaxEntries
	}
	if c.lookupTimeout <= 0 {
		c.lookupTimeout = DefaultLookupTimeout
	}
	if c.clock == nil {
		c.clock = time.Now
	}
	return c
}

// LookupNetIP returns the addresses of host (IPv4 and IPv6, IPv4 unmapped, in
// the resolver's order). An IP literal is returned at once without a lookup
// or trace hooks. The returned slice is shared with the cache and other
// callers: do not modify it.
//
// Errors are *net.DNSError naming host: the resolver's (cached for
// NegativeTTL) or, when ctx ends first, one wrapping ctx.Err() (the shared
// lookup goes on for other callers).
func (c *Cache) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, _, err := c.LookupNetIPStale(ctx, host)
	return addrs, err
}

// LookupNetIPStale is LookupNetIP that also reports whether the answer is
// stale: past its TTL, served while a refresh runs. A caller that reaches
// none of a stale answer's addresses asks Reresolve where the name is now.
func (c *Cache) LookupNetIPStale(ctx context.Context, host string) (addrs []netip.Addr, stale bool, err error) {
	if ip, ok := ParseIPLiteral(host); ok {
		return []netip.Addr{ip}, false, nil
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.DNSStart != nil {
		trace.DNSStart(httptrace.DNSStartInfo{Host: host})
	}
	if host == "" {
		err := &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		c.stats.errors.Add(1)
		traceDone(trace, nil, err, false)
		return nil, false, err
	}
	key := strings.ToLower(host)
	if c.ttl > 0 {
		now := c.clock()
		c.mu.RLock()
		e := c.entries[key]
		c.mu.RUnlock()
		if e != nil {
			if now.Before(e.expires) {
				c.stats.hits.Add(1)
				if e.err != nil {
					c.stats.errors.Add(1)
				}
				err := namedFor(e.err, host)
				traceDone(trace, e.addrs, err, false)
				return e.addrs, false, err
			}
			if e.err == nil && now.Before(e.staleUntil) {
				c.stats.staleServed.Add(1)
				c.startRefresh(key, e, now)
				traceDone(trace, e.addrs, nil, false)
				return e.addrs, true, nil
			}
		}
	}
	addrs, err, coalesced := c.lookupShared(ctx, host, key)
	err = namedFor(err, host)
	traceDone(trace, addrs, err, coalesced)
	return addrs, false, err
}

// Reresolve is for a caller that could connect to none of the addresses
// of a stale answer (LookupNetIPStale): the name may have moved, and the
// refresh that answer started may know where. It returns host's answer
// now: a fresh entry as it stands (the refresh already replaced the stale
// answer), else the answer of the refresh in flight, which it waits for,
// or of one lookup it makes itself (a stale entry whose refresh ended or
// failed), waiting at most until ctx ends. A lookup that fails keeps the
// stale answer, as a failed refresh does, and returns it; a fresh cached
// failure is returned as it is. DNSStart and DNSDone fire as for a lookup
// (Coalesced when it joined the refresh): net/http, which has no cache,
// would have looked the name up for this dial. An IP literal is returned
// at once, without hooks.
func (c *Cache) Reresolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, ok := ParseIPLiteral(host); ok {
		return []netip.Addr{ip}, nil
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.DNSStart != nil {
		trace.DNSStart(httptrace.DNSStartInfo{Host: host})
	}
	key := strings.ToLower(host)
	var e *entry
	if c.ttl > 0 {
		c.mu.RLock()
		e = c.entries[key]
		c.mu.RUnlock()
	}
	if e != nil && c.clock().Before(e.expires) {
		c.stats.hits.Add(1)
		if e.err != nil {
			c.stats.errors.Add(1)
		}
		err := namedFor(e.err, host)
		traceDone(trace, e.addrs, err, false)
		return e.addrs, err
	}
	if e != nil && e.err != nil {
		e = nil // an expired failure is no answer to keep
	}
	addrs, err, coalesced := c.lookupSharedKeeping(ctx, host, key, e)
	err = namedFor(err, host)
	traceDone(trace, addrs, err, coalesced)
	return addrs, err
}

// namedFor returns err naming host as this caller spelled it, as net's
// resolver does: answers are shared by every spelling of a name (the cache
// key is lower-cased), so a cached or shared failure may name another one.
// The shared error is copied, never modified.
func namedFor(err error, host string) error {
	de, ok := err.(*net.DNSError)
	if !ok || de.Name == host {
		return err
	}
	named := *de
	named.Name = host
	return &named
}

// traceDone fires DNSDone, converting addresses only when a hook wants them.
func traceDone(trace *httptrace.ClientTrace, addrs []netip.Addr, err error, coalesced bool) {
	if trace == nil || trace.DNSDone == nil {
		return
	}
	info := httptrace.DNSDoneInfo{Err: err, Coalesced: coalesced}
	if len(addrs) > 0 {
		info.Addrs = make([]net.IPAddr, len(addrs))
		for i, a := range addrs {
			info.Addrs[i] = net.IPAddr{IP: net.IP(a.AsSlice()), Zone: a.Zone()}
		}
	}
	trace.DNSDone(info)
}
