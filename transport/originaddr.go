package transport

import (
	"hash/maphash"
	"net/url"
	"sync/atomic"
)

// originAddrCache remembers the "host:port" built for recent URL hosts that
// are not already in that form. Most URLs name no port
// ("https://api.example.com/v1"), and building "api.example.com:443" for
// each request costs an allocation and about 100 ns; net/http pays it on
// every request. The cache is direct-mapped and lock-free: a slot holds one
// immutable entry, a lookup is one atomic load and two string compares, and
// a host evicts whatever host shared its slot (so memory stays bounded
// whatever the number of hosts).
type originAddrCache struct {
	slots [originAddrSlots]atomic.Pointer[originAddrEntry]
}

const originAddrSlots = 64

// originAddrEntry is what originAddr returned for a URL with this scheme
// and Host.
type originAddrEntry struct {
	scheme, host, addr string
}

var originAddrSeed = maphash.MakeSeed()

func originAddrSlot(host string) int {
	return int(maphash.String(originAddrSeed, host) % originAddrSlots)
}

// addr is originAddr(u), from the cache when u's scheme and host were seen
// recently. Errors are not cached.
func (c *originAddrCache) addr(u *url.URL) (string, error) {
	if canonicalHostPort(u.Host) {
		return u.Host, nil
	}
	slot := &c.slots[originAddrSlot(u.Host)]
	if e := slot.Load(); e != nil && e.host == u.Host && e.scheme == u.Scheme {
		return e.addr, nil
	}
	addr, err := originAddr(u)
	if err != nil {
		return "", err
	}
	slot.Store(&originAddrEntry{scheme: u.Scheme, host: u.Host, addr: addr})
	return addr, nil
}
