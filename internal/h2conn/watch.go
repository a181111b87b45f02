package h2conn

import (
	"errors"
	"net/http"

	"golang.org/x/net/http2"
)

// errNoPool is what x/net gets if it asks the watch for a connection before
// the connection exists.
var errNoPool = errors.New("h2conn: no connection pool behind this transport")

// deathWatch is installed as the x/net transport's ClientConnPool only to
// hear MarkDead: x/net calls it when the connection receives GOAWAY (before
// failing later streams) and when it closes. Each Conn has its own
// transport, so the watch knows its Conn without a lookup.
type deathWatch struct {
	c *Conn
}

// GetClientConn is asked only from x/net's Transport.RoundTrip, which this
// package calls once per connection, in markInUse (inuse_legacy.go): it
// hands over the watched connection once, so that x/net counts it as used
// (the marker stops x/net right after that). A second ask could only be
// x/net retrying a marker that reached ClientConn.RoundTrip and found the
// connection unusable: refused, so that the retry loop, with its backoff of
// up to 32 s, ends at once.
func (w deathWatch) GetClientConn(*http.Request, string) (*http2.ClientConn, error) {
	if w.c.cc == nil || !w.c.inUseHanded.CompareAndSwap(false, true) {
		return nil, errNoPool
	}
	return w.c.cc, nil
}

func (w deathWatch) MarkDead(*http2.ClientConn) {
	// Called on x/net's frame-reading goroutine (or a timer): never block it.
	if w.c.markDead() {
		go w.c.closeNow()
	}
	w.c.deathFreed()
}
