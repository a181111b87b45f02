package transport

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ferryhttp/ferry/altsvc"
)

// The Alt-Svc side of the transport: which cache a Transport uses, how
// responses feed it, and NetworkChanged. The cache decides what is usable
// (expiry, broken marks with backoff, clear); the transport only reports
// what it saw and what worked.

// altSvcCache returns the cache the Transport reads and feeds: AltSvc, or a
// private one created on first use.
func (t *Transport) altSvcCache() *altsvc.Cache {
	return t.h3init().cache
}

// noteAltSvc feeds the Alt-Svc header of a response from key's origin to
// the cache. Only https origins have alternatives (RFC 7838 section 2.1);
// cleartext responses, and every response when DisableHTTP3 is set, are
// ignored. A response without Alt-Svc costs a map lookup; an unchanged
// header is not parsed again (the cache compares it with the last one).
//
// When the header leaves the origin with a usable h3 alternative and no
// HTTP/3 connection to it exists or is being dialled, the QUIC handshake
// starts in the background right away, so the next request usually finds
// HTTP/3 ready instead of paying the head start: one dial per origin at a
// time, and none when maxConcurrentH3Dials are already running (h3dial.go).
func (t *Transport) noteAltSvc(key connKey, resp *http.Response) {
	if key.scheme != "https" || t.DisableHTTP3 || resp == nil {
		return
	}
	values := resp.Header["Alt-Svc"]
	if len(values) == 0 {
		return
	}
	o, err := altsvc.OriginFromHostPort("https", key.addr)
	if err != nil {
		return
	}
	h := t.h3init()
	// A partly malformed header still updates the cache with its valid
	// alternatives; the parse errors are the server's problem, not the
	// request's.
	_ = h.cache.UpdateFromResponse(o, values, responseAge(resp.Header))
	if !t.h3Enabled() || key.proxied() {
		return
	}
	if alt, ok := h.cache.Usable(o, "h3"); ok {
		t.preconnectH3(h, o, alt, key)
	}
}

// responseAge is the response's Age header (RFC 9111 section 5.1) as a
// duration; absent or invalid means 0.
func responseAge(h http.Header) time.Duration {
	v := h["Age"]
	if len(v) == 0 {
		return 0
	}
	n, err := strconv.ParseUint(v[0], 10, 32)
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Second
}

// NetworkChanged tells the Transport that the machine moved to another
// network (an address was added or removed, the default route changed): the
// Alt-Svc cache drops every alternative not advertised with `persist=1`
// and forgets every broken mark (they described the old network; see
// altsvc.Cache.NetworkChanged), and idle connections of every protocol are
// closed, since they may now go through the wrong interface. Connections in
// use are not interrupted.
//
// A shared AltSvc cache is changed for every Transport using it. The
// package documentation shows how a Linux program can call NetworkChanged
// when its addresses change.
func (t *Transport) NetworkChanged() {
	t.altSvcCache().NetworkChanged()
	t.CloseIdleConnections()
}
