package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http/httptrace"
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
// One QUIC dial at a time per origin: a "flight", to the origin's first
// usable alternative. Whoever finds no pooled connection starts one, or
// joins the one in progress (even when it goes to another alternative of
// the origin than the one the request looked up: an origin whose Alt-Svc
// names a new alternative in every response still gets one dial at a
// time, the next one only after it ended), so 64 requests arriving
// together make one handshake. At most maxConcurrentH3Dials flights run
// at once over all origins; see its comment for what happens beyond. A
// flight runs on its own goroutine with a context of its own (no
// request's cancellation; its trace hooks go to the request that started
// it, see h3conn.DialEvents), bounded by the handshake timeout and by the
// Dialer's Close. When it ends it marks the alternative working (and
// pools the connection) or broken (exponential backoff in the cache), then
// wakes its waiters.
//
// The head start is the flight's, not each request's: it ends at a fixed
// time after the flight started. A request that joins late waits only for
// what is left of it, so a network that drops UDP costs the head start once,
// however many requests arrive before the dial gives up, and nothing once
// the alternative is marked broken.
//
// The Dialer owns a UDP socket and quic-go goroutines. It is opened by the
// first flight and closed by CloseIdleConnections once no HTTP/3 connection
// is left in use, which also abandons handshakes in progress (without
// marking anything broken); the next flight opens a new one. Meanwhile the
// Dialer itself releases the socket whenever its last connection closed
// (idle expiry, peer close) and no dial runs.

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

	// quic is what QUIC dials and connections hold of MaxConnsPerHost in
	// the Transport's main pool (maxconns.go); unused without a limit.
	quic quicSlots

	// dialsNow is the number of QUIC dials running (Dialer.Dial called and
	// not returned); dialsPeak is its highest value. Tests read them.
	dialsNow  atomic.Int32
	dialsPeak atomic.Int32
	// live mirrors len(conns), so that an HTTP/1.1 connection going idle
	// learns without h.mu whether idle HTTP/3 ones may need closing
	// (h3idle.go).
	live atomic.Int32

	mu      sync.Mutex // guards dialer, flights, conns and perTCP
	dialer  *h3Dialer
	flights map[altsvc.Origin]*h3Flight // the dial in progress per origin
	conns   map[*h3conn.Conn]h3Conn     // every connection made, until closed
	perTCP  map[connKey]int             // conns counted by TCP key of their origin
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

// h3Dialer is one h3conn.Dialer and the flights using it.
type h3Dialer struct {
	d       *h3conn.Dialer
	flights sync.WaitGroup
}

// h3Flight is one QUIC dial that requests may wait for.
type h3Flight struct {
	key      h3Key         // the origin and the alternative dialled
	tcpKey   connKey       // the origin's TCP key (h3idle.go)
	done     chan struct{} // closed when the dial ended and err is set
	deadline time.Time     // end of the head start
	err      error
	// dialed is set, under h3Client.mu, once the connection is in conns
	// (tests count a flight as a connection only until then).
	dialed bool
	// slotKey is the TCP key under which the dial holds a MaxConnsPerHost
	// slot of the main pool (maxconns.go); set only with a limit.
	slotKey connKey
	// events carries the dial's httptrace hooks to the request that
	// started the flight (h3conn.DialEvents); nil when it has none.
	events *h3conn.DialEvents
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
		h.flights = make(map[altsvc.Origin]*h3Flight)
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

func (h *h3Client) headStartDuration() time.Duration {
	if h.headStart > 0 {
		return h.headStart
	}
	return h3conn.DefaultHeadStart
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
func (t *Transport) joinH3Flight(h *h3Client, key h3Key, alt altsvc.Alternative, ev *h3conn.DialEvents, tcpKey connKey) (f *h3Flight, started bool) {
	h.mu.Lock()
	if f := h.flights[key.origin]; f != nil {
		h.mu.Unlock()
		return f, false
	}
	if len(h.flights) >= maxConcurrentH3Dials {
		h.mu.Unlock()
		return nil, false
	}
	limited := t.MaxConnsPerHost > 0
	if limited {
		// Taking the slot may close an idle TCP connection: not under h.mu.
		h.mu.Unlock()
		if !t.takeQUICSlot(h, tcpKey) {
			return nil, false
		}
		h.mu.Lock()
		if f := h.flights[key.origin]; f != nil {
			h.mu.Unlock() // another request started one meanwhile
			t.releaseQUICSlot(h, tcpKey)
			return f, false
		}
		if len(h.flights) >= maxConcurrentH3Dials {
			h.mu.Unlock()
			t.releaseQUICSlot(h, tcpKey)
			return nil, false
		}
	}
	if h.dialer == nil {
		h.dialer = &h3Dialer{d: h3conn.NewDialer(t.h3DialerConfig(h))}
	}
	dl := h.dialer
	f = &h3Flight{key: key, tcpKey: tcpKey, done: make(chan struct{}), deadline: time.Now().Add(h.headStartDuration()), events: ev}
	if limited {
		f.slotKey = tcpKey
	}
	h.flights[key.origin] = f
	dl.flights.Add(1)
	h.mu.Unlock()
	go t.runH3Flight(h, dl, key, alt, f)
	return f, true
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

// runH3Flight dials, records the outcome in the cache and the pool, and
// wakes the flight's waiters.
func (t *Transport) runH3Flight(h *h3Client, dl *h3Dialer, key h3Key, alt altsvc.Alternative, f *h3Flight) {
	defer dl.flights.Done()
	addr := net.JoinHostPort(alt.Host, strconv.Itoa(int(alt.Port)))
	ctx := context.Background()
	if f.events != nil {
		ctx = httptrace.WithClientTrace(ctx, f.events.Hooks())
	}
	n := h.dialsNow.Add(1)
	for p := h.dialsPeak.Load(); n > p && !h.dialsPeak.CompareAndSwap(p, n); p = h.dialsPeak.Load() {
	}
	c, err := dl.d.Dial(ctx, key.origin.Host(), addr)
	h.dialsNow.Add(-1)
	limited := t.MaxConnsPerHost > 0
	hostConns := 0 // the origin's HTTP/3 connections once c is added
	switch {
	case err == nil:
		t.stats.countAltSvcUpgrade()
		h.cache.MarkWorking(key.origin, alt)
		if limited {
			h.quic.adopt(c, key, f.slotKey) // the dial's slot moves to c
		}
		h.mu.Lock()
		gone := h.pruneConnsLocked()
		h.addConnLocked(c, h3Conn{key: key, tcp: f.tcpKey})
		hostConns = h.perTCP[f.tcpKey]
		f.dialed = true
		h.mu.Unlock()
		t.quicGone(h, gone)
		h.pool.AddShared(key, c)
	case errors.Is(err, h3conn.ErrDialerClosed):
		// Abandoned by CloseIdleConnections: says nothing about the network.
	default:
		t.stats.countBroken()
		h.cache.MarkBroken(key.origin, alt)
	}
	h.mu.Lock()
	if h.flights[key.origin] == f {
		delete(h.flights, key.origin)
	}
	f.err = err
	h.mu.Unlock()
	if err != nil && limited {
		// The dial is over: TCP gets its slot back, before the waiters
		// learn the outcome and go over TCP.
		t.releaseQUICSlot(h, f.slotKey)
	}
	close(f.done)
	if limited {
		h.quic.changed()
		if err == nil {
			// A TCP request that queued for the dial's slot meanwhile
			// gets it back at once if nobody is on the new connection.
			t.quicYieldIdle(h, f.slotKey)
		}
	}
	if err == nil {
		// The new connection is idle until its waiters, woken above, take
		// it: it is spared, and the others over the idle limits make room
		// for it (h3idle.go).
		t.trimIdleH3(h, f.tcpKey, hostConns, c)
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
	var dl *h3Dialer
	if len(h.conns) == 0 {
		dl, h.dialer = h.dialer, nil
	}
	h.mu.Unlock()
	t.quicGone(h, gone)
	if dl != nil {
		dl.d.Close()
		dl.flights.Wait()
	}
}
