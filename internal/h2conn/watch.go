package h2conn

import (
	"errors"
	"net/http"

	"golang.org/x/net/http2"
)

// errNoPool is what x/net gets if it ever asks the watch for a connection;
// it only does so from Transport.RoundTrip, which this package never calls.
var errNoPool = errors.New("h2conn: no connection pool behind this transport")

// deathWatch is installed as the x/net transport's ClientConnPool only to
// hear MarkDead: x/net calls it when the connection receives GOAWAY (before
// failing later streams) and when it closes. Each Conn has its own
// transport, so the watch knows its Conn without a lookup.
type deathWatch struct {
	c *Conn
}

func (w deathWatch) GetClientConn(*http.Request, string) (*http2.ClientConn, error) {
	return nil, errNoPool
}

func (w deathWatch) MarkDead(*http2.ClientConn) {
	// Called on x/net's frame-reading goroutine (or a timer): never block it.
	if w.c.markDead() {
		go w.c.closeNow()
	}
	w.c.deathFreed()
}
