package transport

import (
	"hash/maphash"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/ferryhttp/ferry/internal/h1conn"
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

// originAddrEntry is what originAddr returned for a URL with this Host
// and an https scheme or not (the default port depends on nothing else).
type originAddrEntry struct {
	https      bool
	host, addr string
}

var originAddrSeed = maphash.MakeSeed()

func originAddrSlot(host string) int {
	return int(maphash.String(originAddrSeed, host) % originAddrSlots)
}

// addr is originAddr(u), from the cache when u's scheme and host were seen
// recently. Errors are not cached.
func (c *originAddrCache) addr(u *url.URL) (string, error) {
	if h1conn.CanonicalHostPort(u.Host) {
		return u.Host, nil
	}
	slot := &c.slots[originAddrSlot(u.Host)]
	https := u.Scheme == "https"
	if e := slot.Load(); e != nil && e.host == u.Host && e.https == https {
		return e.addr, nil
	}
	addr, err := originAddr(u)
	if err != nil {
		return "", err
	}
	// u.Host may share memory with a long URL string: keep only the host.
	// A miss thus costs two allocations more than building addr alone.
	slot.Store(&originAddrEntry{https: https, host: strings.Clone(u.Host), addr: addr})
	return addr, nil
}
