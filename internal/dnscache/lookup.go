package dnscache

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"
)

// lookupResult is what one shared resolver call hands every waiter.
type lookupResult struct {
	addrs []netip.Addr
	err   error
}

// lookupShared resolves key through the singleflight group, waiting at most
// until ctx ends. coalesced reports that the answer was shared with another
// caller (DNSDone.Coalesced).
func (c *Cache) lookupShared(ctx context.Context, host, key string) (addrs []netip.Addr, err error, coalesced bool) {
	return c.lookupSharedKeeping(ctx, host, key, nil)
}

// lookupSharedKeeping is lookupShared for a name whose stale answer, when
// stale is not nil, a failed lookup keeps (resolveRefresh) instead of
// replacing it with the failure. A lookup in flight for key (a refresh
// included) is joined whatever it was started for.
func (c *Cache) lookupSharedKeeping(ctx context.Context, host, key string, stale *entry) (addrs []netip.Addr, err error, coalesced bool) {
	if err := ctx.Err(); err != nil {
		c.stats.errors.Add(1)
		return nil, contextDNSError(host, err), false
	}
	led := false
	ch := c.group.DoChan(key, func() (any, error) {
		led = true
		if stale != nil {
			return c.resolveRefresh(key, stale), nil
		}
		return c.resolveAndStore(key), nil
	})
	if c.testHookJoined != nil {
		c.testHookJoined(key)
	}
	select {
	case r := <-ch:
		// led is written before the result is sent on ch, so reading it
		// here is ordered after the write.
		if led {
			c.stats.misses.Add(1)
		} else {
			c.stats.coalesced.Add(1)
		}
		res := r.Val.(lookupResult)
		if res.err != nil {
			c.stats.errors.Add(1)
		}
		return res.addrs, res.err, r.Shared
	case <-ctx.Done():
		c.stats.errors.Add(1)
		return nil, contextDNSError(host, ctx.Err()), false
	}
}

// resolveAndStore asks the resolver on a context of its own and records the
// answer (or the failure) before the waiters are released.
func (c *Cache) resolveAndStore(key string) lookupResult {
	ctx, cancel := context.WithTimeout(context.Background(), c.lookupTimeout)
	addrs, err := c.resolver.LookupNetIP(ctx, "ip", key)
	cancel()
	if err == nil && len(addrs) == 0 {
		err = &net.DNSError{Err: "no such host", Name: key, IsNotFound: true}
	}
	if err != nil {
		err = asDNSError(key, err)
		if c.ttl > 0 && c.negativeTTL > 0 {
			now := c.clock()
			c.store(key, &entry{err: err, expires: now.Add(c.negativeTTL)}, now)
		}
		return lookupResult{err: err}
	}
	return c.storeAnswer(key, addrs)
}

// storeAnswer unmaps a successful answer's addresses and, when caching is
// on, records it with its TTL and stale window.
func (c *Cache) storeAnswer(key string, addrs []netip.Addr) lookupResult {
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	if c.ttl > 0 {
		now := c.clock()
		e := &entry{addrs: addrs, expires: now.Add(c.ttl)}
		e.staleUntil = e.expires
		if c.maxStale > 0 {
			e.staleUntil = e.expires.Add(c.maxStale)
		}
		c.store(key, e, now)
	}
	return lookupResult{addrs: addrs}
}

// startRefresh starts the one background refresh of a stale entry, unless
// one is running or a failed one asked to wait.
func (c *Cache) startRefresh(key string, e *entry, now time.Time) {
	if now.Before(e.retryAt) || !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	c.stats.refreshes.Add(1)
	c.refreshes.Add(1)
	go func() {
		defer c.refreshes.Done()
		r := <-c.group.DoChan(key, func() (any, error) {
			return c.resolveRefresh(key, e), nil
		})
		_ = r
	}()
}

// resolveRefresh is resolveAndStore for a stale entry: a failure keeps the
// stale answer (until its staleUntil) and holds off the next refresh for
// NegativeTTL instead of replacing the answer with the error.
func (c *Cache) resolveRefresh(key string, stale *entry) lookupResult {
	ctx, cancel := context.WithTimeout(context.Background(), c.lookupTimeout)
	addrs, err := c.resolver.LookupNetIP(ctx, "ip", key)
	cancel()
	if err == nil && len(addrs) > 0 {
		return c.storeAnswer(key, addrs)
	}
	c.stats.refreshErrors.Add(1)
	now := c.clock()
	retry := c.negativeTTL
	if retry < 0 {
		retry = 0
	}
	kept := &entry{addrs: stale.addrs, expires: stale.expires, staleUntil: stale.staleUntil, retryAt: now.Add(retry)}
	c.mu.Lock()
	if c.entries[key] == stale { // not replaced or evicted meanwhile
		c.setLocked(key, kept)
	}
	c.mu.Unlock()
	return lookupResult{addrs: stale.addrs}
}

// store records e for key, making room first when the cache is full.
func (c *Cache) store(key string, e *entry, now time.Time) {
	c.mu.Lock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.maxEntries {
		c.evictLocked(now)
	}
	c.setLocked(key, e)
	c.mu.Unlock()
}

// asDNSError returns err as a *net.DNSError naming host, keeping the
// resolver's own *net.DNSError when it is one.
func asDNSError(host string, err error) error {
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.Name == "" {
			de.Name = host
		}
		return de
	}
	return &net.DNSError{
		Err:       err.Error(),
		Name:      host,
		IsTimeout: errors.Is(err, context.DeadlineExceeded),
		UnwrapErr: err,
	}
}

// contextDNSError reports a caller's context ending while it waited, as
// net's resolver does: "lookup host: i/o timeout" (IsTimeout) for a
// deadline, "lookup host: operation was canceled" for a cancel, unwrapping
// to an error that errors.Is the context's.
func contextDNSError(host string, err error) error {
	err = NetContextError(err)
	return &net.DNSError{
		Err:       err.Error(),
		Name:      host,
		IsTimeout: errors.Is(err, context.DeadlineExceeded),
		UnwrapErr: err,
	}
}
