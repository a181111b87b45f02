package transport

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// sharedRegistry lists the shared connections a Transport created, so that
// CloseIdleConnections can close the idle ones (the pool's CloseIdle only
// closes exclusive connections). It is touched when a connection is dialled
// and by CloseIdleConnections, never per request. Entries that are no
// longer usable are pruned when the list has doubled since the last prune;
// the dial that pruned takes them out of the pool as well (dialAny), so
// that every shared connection in the pool is listed here.
type sharedRegistry struct {
	// mu guards m and pruneAt; no connection method is called under it.
	mu      sync.Mutex
	m       map[sharedConn]connKey
	pruneAt int
}

type sharedEntry struct {
	c   sharedConn
	key connKey
}

// add lists c and, when the list has doubled since the last prune, prunes
// it. It returns the connections the prune forgot; the caller must take
// them out of the pool too, since CloseIdleConnections finds pooled
// connections only here.
func (r *sharedRegistry) add(c sharedConn, key connKey) []sharedEntry {
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[sharedConn]connKey)
	}
	r.m[c] = key
	prune := len(r.m) >= r.pruneAt
	if prune {
		r.pruneAt = 2*len(r.m) + 16 // reset below after the prune
	}
	r.mu.Unlock()
	if prune {
		return r.prune()
	}
	return nil
}

// prune forgets connections that can take no new stream and returns them.
func (r *sharedRegistry) prune() []sharedEntry {
	var gone []sharedEntry
	for _, e := range r.snapshot() {
		if !e.c.Usable() {
			r.remove(e.c)
			gone = append(gone, e)
		}
	}
	r.mu.Lock()
	r.pruneAt = 2*len(r.m) + 16
	r.mu.Unlock()
	return gone
}

func (r *sharedRegistry) remove(c sharedConn) {
	r.mu.Lock()
	delete(r.m, c)
	r.mu.Unlock()
}

func (r *sharedRegistry) snapshot() []sharedEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]sharedEntry, 0, len(r.m))
	for c, k := range r.m {
		out = append(out, sharedEntry{c, k})
	}
	return out
}

// altConn is the RoundTripper a caller's TLSNextProto function returned
// for a connection, shared by every request of its key as net/http shares
// it, until CloseIdleConnections drops it (net/http does not close the
// connection then either: the RoundTripper owns it).
type altConn struct {
	rt   http.RoundTripper
	dead atomic.Bool
}

func newAltConn(rt http.RoundTripper) *altConn { return &altConn{rt: rt} }

func (a *altConn) ReserveStream() bool { return !a.dead.Load() }
func (a *altConn) ReleaseStream()      {}
func (a *altConn) Usable() bool        { return !a.dead.Load() }

// Close stops new requests; the RoundTripper keeps its connection.
func (a *altConn) Close() error {
	a.dead.Store(true)
	return nil
}

func (a *altConn) RoundTrip(req *http.Request) (*http.Response, error) {
	return a.rt.RoundTrip(req)
}

// closeIdle drops the RoundTripper and lets it close its idle connections.
func (a *altConn) closeIdle() {
	a.dead.Store(true)
	if c, ok := a.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
