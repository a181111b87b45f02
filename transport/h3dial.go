package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhttp/ferry/altsvc"
	"github.com/ferryhttp/ferry/internal/h3conn"
	"github.com/ferryhttp/ferry/internal/idlepool"
)

// HTTP/3 connections: where they come from and where they go.
//
// One QUIC dial at a time per origin, at most maxConcurrentH3Dials at once:
// h3conn.Flights runs them (one "flight" per origin, that requests join
// and wait for up to its head start) on one h3conn.Dialer. This file says
// what a flight's outcome does here: it marks the alternative working
// (and pools the connection) or broken (exponential backoff in the
// cache), before the waiters wake. The Dialer owns a UDP socket and
// quic-go goroutines; CloseIdleConnections closes it once no HTTP/3
// connection is left in use, which also abandons handshakes in progress
// (without marking anything broken); the next flight opens a new one.
// Meanwhile the Dialer itself releases the socket whenever its last
// connection closed (idle expiry, peer close) and no dial runs.

// maxConcurrentH3Dials caps the QUIC dials a Transport runs at once, over
// all origins, as browsers bound their background work. Every dial may
// outlive the request that started it (it goes on in the background when
// the request takes TCP, see h3.go), so the cap covers them all. Beyond
// it nothing is queued: the response whose Alt-Svc would have started a
// dial starts none, and a request that would have started one goes over
// TCP at once, without waiting for QUIC; a later request or response of
// that origin starts the dial once fewer run. So an application talking to
// many origins whose alternatives do not answer (UDP dropped) holds at
// most this many handshakes, their goroutines and buffers, whatever the
// number of origins.
const maxConcurrentH3Dials = 8

// h3Key names the HTTP/3 connections of one origin to one alternative.
type h3Key struct {
	origin  altsvc.Origin
	altHost string
	altPort uint16
}

// h3Client is a Transport's HTTP/3 state, created on first use.
type h3Client struct {
	once         sync.Once
	cache        *altsvc.Cache
	pool         *idlepool.Pool[h3Key, *h3conn.Conn]
	sessionCache tls.ClientSessionCache // QUIC tickets, kept apart from TCP's

	// Test hooks, set before the Transport's first request. Zero means
	// h3conn.DefaultHeadStart and the Transport's handshake timeout.
	headStart        time.Duration
	handshakeTimeout time.Duration
	// headStartTimer, when set, replaces time.NewTimer for the wait of a
	// request for a QUIC dial: it returns the channel that ends the wait
	// and a stop function.
	headStartTimer func(time.Duration) (<-chan time.Time, func() bool)
	// beforeSend, when set, is called with the connection a request is
	// about to be sent on (its stream reserved).
	beforeSend func(*h3conn.Conn)

	// waits counts requests that waited for a QUIC dial (paid part of a
	// head start); tests read it.
	waits atomic.Int64

	// flights are the QUIC dials in progress, one per origin, and the
	// Dialer they use.
	flights h3conn.Flights[altsvc.Origin, h3Key]

	// quic is what QUIC dials and connections hold of MaxConnsPerHost in
	// the Transport's main pool (maxconns.go); unused without a limit.
	quic quicSlots

	// live mirrors len(conns), so that an HTTP/1.1 connection going idle
	// learns without h.mu whether idle HTTP/3 ones may need closing
	// (h3idle.go).
	live atomic.Int32

	mu     sync.Mutex              // guards conns and perTCP
	conns  map[*h3conn.Conn]h3Conn // every connection made, until closed
	perTCP map[connKey]int         // conns counted by TCP key of their origin
}

// addConnLocked records c; h.mu is held.
func (h *h3Client) addConnLocked(c *h3conn.Conn, e h3Conn) {
	h.conns[c] = e
	h.perTCP[e.tcp]++
	h.live.Store(int32(len(h.conns)))
}

// dropConnLocked forgets c; h.mu is held.
func (h *h3Client) dropConnLocked(c *h3conn.Conn) {
	e, ok := h.conns[c]
	if !ok {
		return
	}
	delete(h.conns, c)
	if h.perTCP[e.tcp]--; h.perTCP[e.tcp] <= 0 {
		delete(h.perTCP, e.tcp)
	}
	h.live.Store(int32(len(h.conns)))
}

// h3Conn is what h3Client.conns knows of a connection: its HTTP/3 pool key
// and its origin's TCP key (the key its idle TCP connections are under).
type h3Conn struct {
	key h3Key
	tcp connKey
}

// h3init returns t's HTTP/3 state, creating it once.
func (t *Transport) h3init() *h3Client {
	h := &t.h3
	h.once.Do(func() {
		h.cache = t.AltSvc
		if h.cache == nil {
			h.cache = altsvc.New(altsvc.Options{})
		}
		// No MaxConnsPerKey here: with MaxConnsPerHost every QUIC dial and
		// connection holds a slot of the main pool under its origin's TCP
		// key instead, so that the limit covers both (maxconns.go).
		h.pool = idlepool.New[h3Key, *h3conn.Conn](idlepool.Config{
			IdleTimeout: t.IdleConnTimeout,
		})
		h.sessionCache = tls.NewLRUClientSessionCache(0)
		h.flights.Max = maxConcurrentH3Dials
		h.flights.NewDialer = func() *h3conn.Dialer { return h3conn.NewDialer(t.h3DialerConfig(h)) }
		h.conns = make(map[*h3conn.Conn]h3Conn)
		h.perTCP = make(map[connKey]int)
	})
	return h
}

// h3Enabled reports whether t may use HTTP/3 at all: not disabled, HTTP/2
// not turned off explicitly (protoSet.h3), dialing is ferry's own (a custom
// Dial or DialTLS hook means the caller controls every connection, which a
// UDP socket of ours would bypass), and keep-alives are on (HTTP/3
// connections are shared and kept). t.init has run.
func (t *Transport) h3Enabled() bool {
	return !t.DisableHTTP3 && !t.DisableKeepAlives && t.h2.protos.h3 &&
		t.DialContext == nil && t.Dial == nil && t.DialTLSContext == nil && t.DialTLS == nil
}

// preconnectH3 starts a flight to alt unless o already has a connection to
// it, a dial is in progress for o, or maxConcurrentH3Dials are running;
// tcpKey is the TCP key of the response that advertised alt. With
// MaxConnsPerHost it does nothing: the dial would need a slot under the
// origin's TCP key, which only a request knows exactly (the next request
// starts the dial, see quicSlots).
func (t *Transport) preconnectH3(h *h3Client, o altsvc.Origin, alt altsvc.Alternative, tcpKey connKey) {
	if t.MaxConnsPerHost > 0 {
		return
	}
	key := h3Key{origin: o, altHost: alt.Host, altPort: alt.Port}
	if h.pool.ConnsLen(key) > 0 {
		return
	}
	t.joinH3Flight(h, key, alt, nil, tcpKey)
}

// joinH3Flight returns the flight of key's origin, whatever alternative it
// dials, starting one to key if none is in progress; started reports that
// this call started it, with ev (may be nil) receiving the dial's trace
// hooks. It returns nil when maxConcurrentH3Dials flights are running.
// With MaxConnsPerHost a new flight first takes a slot of tcpKey, the
// request's TCP key, in the main pool (takeQUICSlot); it returns nil when
// it cannot.
func (t *Transport) joinH3Flight(h *h3Client, key h3Key, alt altsvc.Alternative, ev *h3conn.DialEvents, tcpKey connKey) (f *h3conn.Flight[h3Key], started bool) {
	if f, full := h.flights.Find(key.origin); f != nil || full {
		return f, false
	}
	limited := t.MaxConnsPerHost > 0
	// Taking the slot may close an idle TCP connection: under no lock.
	if limited && !t.takeQUICSlot(h, tcpKey) {
		return nil, false
	}
	l := &h3Landing{t: t, h: h, key: key, alt: alt, tcpKey: tcpKey}
	f, started = h.flights.Start(key.origin, key, h3conn.FlightJob{
		Host: key.origin.Host(), Addr: net.JoinHostPort(alt.Host, strconv.Itoa(int(alt.Port))),
		HeadStart: h.headStart, Events: ev, Landed: l.landed, Woken: l.woken,
	})
	if limited && !started {
		t.releaseQUICSlot(h, tcpKey) // another request started one, or the cap is reached
	}
	return f, started
}

// h3DialerConfig is the Transport's settings as h3conn sees them.
func (t *Transport) h3DialerConfig(h *h3Client) h3conn.Config {
	tlsCfg := t.clonedTLSConfig(h.sessionCache)
	timeout := h.handshakeTimeout
	if timeout == 0 && t.TLSHandshakeTimeout > 0 {
		timeout = t.TLSHandshakeTimeout
	}
	return h3conn.Config{
		TLSConfig:              tlsCfg,
		MaxResponseHeaderBytes: t.maxHeaderBytes(),
		DisableCompression:     t.DisableCompression,
		HandshakeTimeout:       timeout,
		LookupNetIP: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return t.dialer.Resolve(ctx, host)
		},
		OnPathDead: func(c *h3conn.Conn) { t.h3PathDead(h, c) },
		OnIdle:     func(c *h3conn.Conn) { t.h3WentIdle(h, c) },
	}
}

// h3PathDead runs when c judged its network path dead (its packets went
// unacknowledged, see h3conn's pathwatch.go), before c closes: c leaves the
// pool, so that no request waits on it, and its alternative is marked
// broken, so that the origin's requests use TCP, without a head start, for
// the alternative's backoff. The requests on c then fail, and sendH3
// retries those that may be over TCP. The set of connections and the
// MaxConnsPerHost slot forget c as for any connection that died
// (pruneConnsLocked, quicReclaim) once its last request is over.
func (t *Transport) h3PathDead(h *h3Client, c *h3conn.Conn) {
	h.mu.Lock()
	e, ok := h.conns[c]
	h.mu.Unlock()
	if !ok {
		return
	}
	key := e.key
	h.pool.RemoveShared(key, c)
	t.stats.countBroken()
	h.cache.MarkBroken(key.origin, altsvc.Alternative{Protocol: "h3", Host: key.altHost, Port: key.altPort})
}

// h3Landing is what a flight's outcome does to the transport.
type h3Landing struct {
	t      *Transport
	h      *h3Client
	key    h3Key
	alt    altsvc.Alternative
	tcpKey connKey // the origin's TCP key (h3idle.go); with MaxConnsPerHost, the one the dial holds a slot of (maxconns.go)
	// hostConns is the origin's HTTP/3 connections once the new one is
	// added; only the flight's goroutine touches it.
	hostConns int
}

// landed records the outcome in the cache, the set of connections and the
// pool, before the flight's waiters wake.
func (l *h3Landing) landed(c *h3conn.Conn, err error) {
	t, h, key := l.t, l.h, l.key
	limited := t.MaxConnsPerHost > 0
	switch {
	case err == nil:
		t.stats.countAltSvcUpgrade()
		h.cache.MarkWorking(key.origin, l.alt)
		if limited {
			h.quic.adopt(c, key, l.tcpKey) // the dial's slot moves to c
		}
		h.mu.Lock()
		gone := h.pruneConnsLocked()
		h.addConnLocked(c, h3Conn{key: key, tcp: l.tcpKey})
		l.hostConns = h.perTCP[l.tcpKey]
		h.mu.Unlock()
		t.quicGone(h, gone)
		h.pool.AddShared(key, c)
	case errors.Is(err, h3conn.ErrDialerClosed):
		// Abandoned by CloseIdleConnections: says nothing about the network.
	default:
		t.stats.countBroken()
		h.cache.MarkBroken(key.origin, l.alt)
	}
	if err != nil && limited {
		// The dial is over: TCP gets its slot back, before the waiters
		// learn the outcome and go over TCP.
		t.releaseQUICSlot(h, l.tcpKey)
	}
}

// woken runs once the flight's waiters are woken.
func (l *h3Landing) woken(c *h3conn.Conn, err error) {
	t, h := l.t, l.h
	if t.MaxConnsPerHost > 0 {
		h.quic.changed()
		if err == nil {
			// A TCP request that queued for the dial's slot meanwhile
			// gets it back at once if nobody is on the new connection.
			t.quicYieldIdle(h, l.tcpKey)
		}
	}
	if err == nil {
		// The new connection is idle until its waiters take it: it is
		// spared, and the others over the idle limits make room for it
		// (h3idle.go).
		t.trimIdleH3(h, l.tcpKey, l.hostConns, c)
	}
}

// pruneConnsLocked forgets connections that ended on their own (idle
// expiry, peer close) so the set stays the size of what is alive, and
// returns them for quicGone (after h.mu is released).
func (h *h3Client) pruneConnsLocked() (gone []*h3conn.Conn) {
	for c, e := range h.conns {
		if _, idle := c.IdleSince(); !c.Usable() && idle {
			h.dropConnLocked(c)
			h.pool.RemoveShared(e.key, c)
			gone = append(gone, c)
		}
	}
	return gone
}

// closeIdleH3 closes the HTTP/3 connections without a request in flight,
// and, when none is left in use, the Dialer with its UDP socket (abandoning
// handshakes in progress).
func (t *Transport) closeIdleH3() {
	h := &t.h3
	h.mu.Lock()
	type entry struct {
		c   *h3conn.Conn
		key h3Key
	}
	list := make([]entry, 0, len(h.conns))
	for c, e := range h.conns {
		list = append(list, entry{c, e.key})
	}
	h.mu.Unlock()
	var gone []*h3conn.Conn
	for _, e := range list {
		closed := e.c.CloseIfIdle()
		if _, idle := e.c.IdleSince(); closed || !e.c.Usable() && idle {
			h.pool.RemoveShared(e.key, e.c)
			gone = append(gone, e.c)
		}
	}
	h.mu.Lock()
	for _, c := range gone {
		h.dropConnLocked(c)
	}
	unused := len(h.conns) == 0
	h.mu.Unlock()
	t.quicGone(h, gone)
	if unused {
		h.flights.CloseDialer()
	}
}
