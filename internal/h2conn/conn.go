package h2conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// ErrNotH2 is returned by NewClientConn for a TLS connection whose ALPN
// negotiation did not select "h2".
var ErrNotH2 = errors.New("h2conn: TLS connection did not negotiate h2")

// errNoSlot is the error inside the *NotProcessedError that RoundTrip returns
// when it was called without a reservation and could not take one.
var errNoSlot = errors.New("h2conn: connection has no stream available")

// Conn is one HTTP/2 client connection shared by many requests. It is safe
// for concurrent use. See the package documentation for the slot contract.
type Conn struct {
	nc     net.Conn
	tls    *tls.ConnectionState // nil for cleartext HTTP/2
	strict bool
	now    func() time.Time
	// singleUse: DisableKeepAlives, x/net takes one request only.
	singleUse bool
	// pingTimeout bounds the PINGs this package sends itself (judge.go,
	// peersettings.go): HTTP2Config.PingTimeout, or net/http's default.
	pingTimeout time.Duration
	// headerTimeout is Config.ResponseHeaderTimeout: it also bounds a
	// provisional slot's wait for the server's SETTINGS (peersettings.go).
	headerTimeout time.Duration

	// o is ferry's own connection (Config.Own); when set, every method
	// forwards to it and the x/net fields below are unused.
	o *clientConn

	// cc is written once, under mu, before NewClientConn returns; after
	// that it is read without the lock (NewClientConn happens before any
	// method call). closeNow, which x/net may trigger earlier, reads it
	// under mu.
	cc *http2.ClientConn

	// mu guards the fields below. It is never held while calling x/net,
	// closing, or running a trace hook.
	mu sync.Mutex
	// busy counts slots in use: reserved and not yet released, and slots
	// ReserveStream is still deciding on. It is decremented only in
	// dropSlot, which closes a dead connection whose last slot it was.
	busy int
	// unstarted counts slots ReserveStream granted that no RoundTrip has
	// consumed and no ReleaseStream given back (a slot ReserveStream is
	// still deciding on counts in busy only).
	unstarted int
	// xres counts, among unstarted, those that hold an x/net reservation
	// (x/net consumes any one of them on its next RoundTrip). The others
	// are provisional (peersettings.go) or, with strict limits, wait
	// inside x/net.
	xres int
	// rounds counts RoundTrip calls that used a slot (GotConn's Reused).
	rounds int
	// idleSince is when busy last dropped to zero (or the creation time).
	idleSince time.Time
	// releasedBusy: a granted slot was given back since busy was last
	// zero, leaving others busy. The slot that then makes busy zero may be
	// a refused reservation: the connection is idle from that release on,
	// not from the time idleSince still holds (dropSlot).
	releasedBusy bool
	// dead: no new slot will ever be handed out.
	dead bool
	// closed: Close of the x/net connection has been started.
	closed bool
	// lastRound: a request after which x/net takes no new stream started
	// (the one request of a single-use connection, or a request asking to
	// close the connection); judge.go counts on it instead of x/net's
	// State.
	lastRound bool

	// free is the OnStreamFree hook (streamfree.go).
	free streamFreeHook
	// peer says whether the server's SETTINGS are known (peersettings.go).
	peer peerSettings
	// judge runs the checks of refused streams (judge.go).
	judge judgeState
	// inUseHanded: the connection was handed to x/net's pool path once,
	// for markInUse (watch.go).
	inUseHanded atomic.Bool

	// testHookReserving, when set (tests only, before the ReserveStream
	// calls it is to see), runs in ReserveStream after the slot counts as
	// busy and before it is decided whether the slot is granted.
	testHookReserving func()
	// testHookPingIdle, when set (tests only, before the checker goroutine
	// that is to see it starts), runs in checkOnce just before it pings a
	// connection it found full with no slot of ours in use.
	testHookPingIdle func()
	// testHookAwaiting, when set (tests only, before the AwaitPeerSettings
	// call it is to see), runs in AwaitPeerSettings just before it waits.
	testHookAwaiting func()
}

// NewClientConn makes nc an HTTP/2 client connection: it writes the client
// preface and SETTINGS built from cfg and starts x/net's frame reader. nc
// may be a TLS connection whose handshake negotiated "h2" (anything with a
// ConnectionState method is treated as TLS; a different ALPN result is
// ErrNotH2) or a cleartext connection speaking HTTP/2 with prior knowledge.
// NewClientConn owns nc from the call on: on any error nc is closed.
func NewClientConn(nc net.Conn, cfg Config) (*Conn, error) {
	if nc == nil {
		return nil, errors.New("h2conn: nil net.Conn")
	}
	c := &Conn{nc: nc, strict: cfg.strict(), now: cfg.Clock, singleUse: cfg.DisableKeepAlives,
		pingTimeout: defaultPingTimeout, headerTimeout: cfg.ResponseHeaderTimeout, peer: newPeerSettings()}
	if c.now == nil {
		c.now = time.Now
	}
	if cfg.HTTP2 != nil && cfg.HTTP2.PingTimeout > 0 {
		c.pingTimeout = cfg.HTTP2.PingTimeout
	}
	if cs, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := cs.ConnectionState()
		if !st.HandshakeComplete {
			nc.Close()
			return nil, errors.New("h2conn: TLS handshake not complete")
		}
		if st.NegotiatedProtocol != http2.NextProtoTLS {
			nc.Close()
			return nil, fmt.Errorf("%w (negotiated %q)", ErrNotH2, st.NegotiatedProtocol)
		}
		c.tls = &st
	}
	if cfg.Own || ownDefault {
		o, err := newOwnConn(nc, c.tls, cfg)
		if err != nil {
			return nil, fmt.Errorf("h2conn: start connection: %w", err)
		}
		c.o = o
		return c, nil
	}
	t2, err := cfg.newTransports(deathWatch{c})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("h2conn: configure transport: %w", err)
	}
	cc, err := t2.NewClientConn(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("h2conn: start connection: %w", err)
	}
	c.mu.Lock()
	c.cc = cc
	c.idleSince = c.now()
	closedEarly := c.closed
	c.mu.Unlock()
	if closedEarly {
		cc.Close()
		return c, nil
	}
	markInUse(t2, c.singleUse || c.strict)
	return c, nil
}

// NetConn returns the connection given to NewClientConn.
func (c *Conn) NetConn() net.Conn { return c.nc }

// TLS returns the TLS state of the connection, or nil for cleartext HTTP/2.
func (c *Conn) TLS() *tls.ConnectionState { return c.tls }

// ReserveStream claims one request slot, reporting whether it did. It fails
// once the connection is not usable and, unless limits are strict, when the
// connection is at the peer's concurrent-stream limit. Before the peer's
// SETTINGS are known a second slot is provisional (RoundTrip may refuse it
// with ReasonStreamLimit), or refused when an OnStreamFree hook is set.
// Each true result must be followed by exactly one RoundTrip or
// ReleaseStream.
func (c *Conn) ReserveStream() bool {
	if c.o != nil {
		return c.o.reserve()
	}
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return false
	}
	// The slot counts as busy at once (IdleSince and CloseIfIdle see it),
	// but in unstarted only once it is granted, together with what backs
	// it: ReleaseStream tells a slot with an x/net reservation from one
	// without by counting unstarted against xres, and a slot still being
	// decided is neither. Counted early, a release meanwhile kept an x/net
	// reservation for good, a stream lost to the connection
	// (TestReleaseDuringReserveKeepsXnetCount).
	c.busy++
	othersBusy := c.busy > 1
	c.mu.Unlock()
	if c.testHookReserving != nil {
		c.testHookReserving()
	}

	if othersBusy && !c.peerLimitKnown() {
		// Until the server's SETTINGS arrive x/net allows 100 streams
		// (peersettings.go). Without a hook the slot is provisional:
		// RoundTrip reserves it once the limit is known. A pool waiting
		// for streams gets one stream only, then is woken. Strict limits
		// without a hook keep x/net's reservation, as before (x/net's
		// strict mode has its own queueing, see the transport's row).
		hooked := c.free.fn.Load() != nil
		if !hooked && !c.strict {
			c.startProbe()
			c.granted(false)
			return true
		}
		if hooked {
			c.dropSlot(false)
			c.watchLater()
			return false
		}
	}
	if c.cc.ReserveNewRequest() {
		c.granted(true)
		return true
	}
	// x/net says no: the connection is full or unusable. With strict
	// limits a full connection still takes the request (RoundTrip waits);
	// streams of ours in flight make "full" the likely reason, and if it is
	// in fact unusable RoundTrip fails with a retryable error.
	if c.strict && othersBusy {
		c.granted(false)
		return true
	}
	c.dropSlot(false)
	if !othersBusy {
		// None of our streams in use: unusable, or full of streams we
		// released and x/net still counts (judge.go, which pings a
		// connection that stays so).
		if c.unusableNow() {
			c.die()
			return false
		}
		c.checkLater(true)
	}
	c.refusedFull()
	return false
}

// granted counts a slot ReserveStream grants as unstarted, and as holding
// an x/net reservation when xnet is set.
func (c *Conn) granted(xnet bool) {
	c.mu.Lock()
	c.unstarted++
	if xnet {
		c.xres++
	}
	c.mu.Unlock()
}

// ReleaseStream gives back a slot reserved by ReserveStream that will not be
// used by a RoundTrip. Calling it without an unused reservation does
// nothing.
func (c *Conn) ReleaseStream() {
	if c.o != nil {
		c.o.unreserve()
		return
	}
	c.mu.Lock()
	if c.unstarted == 0 {
		c.mu.Unlock()
		return
	}
	// Give back a slot without an x/net reservation if there is one, so
	// that the others keep theirs.
	giveBack := c.unstarted == c.xres
	c.unstarted--
	if giveBack {
		c.xres--
	}
	c.mu.Unlock()
	if giveBack {
		c.releaseXnetReservation()
	}
	c.release(false)
}

// Usable reports whether the connection may still take new streams: false,
// for good, after GOAWAY, after it closed or failed, or once it was made
// single-use and used. A connection that is full is still usable.
func (c *Conn) Usable() bool {
	if c.o != nil {
		return c.o.usable()
	}
	c.mu.Lock()
	dead, busy := c.dead, c.busy
	c.mu.Unlock()
	if dead {
		return false
	}
	if busy > 0 || c.cc.CanTakeNewRequest() {
		return true
	}
	// Judged without waiting for x/net's write lock (judge.go).
	if c.unusableNow() {
		c.die()
		return false
	}
	return true
}

// IdleSince reports whether no slot is in use and, if so, since when (on
// Config.Clock). The pool closes the connection after IdleConnTimeout.
func (c *Conn) IdleSince() (time.Time, bool) {
	if c.o != nil {
		return c.o.idle()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idleSince, c.busy == 0
}

// CloseIfIdle closes the connection if no slot is in use, atomically with
// respect to ReserveStream, and reports whether the connection is now
// closed.
func (c *Conn) CloseIfIdle() bool {
	if c.o != nil {
		return c.o.closeIfIdle()
	}
	c.mu.Lock()
	if c.busy > 0 {
		c.mu.Unlock()
		return false
	}
	c.closeAndUnlock()
	return true
}

// Close closes the connection at once; requests in flight fail. It is
// idempotent and returns nil.
func (c *Conn) Close() error {
	if c.o != nil {
		c.o.close()
		return nil
	}
	c.mu.Lock()
	c.closeAndUnlock()
	return nil
}

// closeAndUnlock, called with c.mu held, marks the connection dead and
// closed, releases c.mu and then closes the x/net connection, once.
func (c *Conn) closeAndUnlock() {
	c.setDeadLocked()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if !already {
		c.cc.Close()
	}
}

// Shutdown stops new streams, sends GOAWAY and waits until the streams in
// flight end, then closes the connection. If ctx ends first it returns
// ctx's error and the connection closes itself when its last slot is
// released.
func (c *Conn) Shutdown(ctx context.Context) error {
	if c.o != nil {
		if err := c.o.shutdown(ctx); err != nil {
			return fmt.Errorf("h2conn: shutdown: %w", err)
		}
		return nil
	}
	c.mu.Lock()
	c.setDeadLocked()
	c.mu.Unlock()
	if err := c.cc.Shutdown(ctx); err != nil {
		return fmt.Errorf("h2conn: shutdown: %w", err)
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

// Ping sends a PING frame and waits for its acknowledgement or ctx.
func (c *Conn) Ping(ctx context.Context) error {
	if c.o != nil {
		return c.o.ping(ctx)
	}
	return c.cc.Ping(ctx)
}

// release gives back one slot; checkXnet asks x/net, once the connection is
// idle, whether it is still usable (after an error, or a single-use request).
func (c *Conn) release(checkXnet bool) {
	idle, dead, closed := c.dropSlot(true)
	if closed {
		c.streamFreed()
		return
	}
	if idle && !dead && checkXnet && !c.cc.CanTakeNewRequest() && c.unusableNow() && c.markDead() {
		c.closeNow()
	}
	c.streamFreed()
}

// dropSlot takes one slot off busy; used says the slot was granted (its
// release makes the connection idle from now on), not refused (its refusal
// does so only if a granted slot was given back while it was decided). Every
// decrement of busy goes through it, because a dead connection is closed
// by whoever gives back its last slot: markDead leaves a connection with a
// slot in use open, and the transport forgets a dead connection without
// closing it. A refused reservation can be that last slot: it counts as
// busy while ReserveStream decides, so a death and the release of every
// other slot meanwhile leave the close to it
// (TestRefusedReserveClosesDeadConn). dropSlot reports whether no slot is
// in use now, whether the connection was dead then, and whether dropSlot
// closed it (outside c.mu).
func (c *Conn) dropSlot(used bool) (idle, dead, closed bool) {
	c.mu.Lock()
	c.busy--
	idle = c.busy == 0
	if idle {
		// A refused slot alone does not end an idle period; a granted
		// one given back meanwhile did (TestRefusedLastSlotKeepsReleaseTime).
		if used || c.releasedBusy {
			c.idleSince = c.now()
		}
		c.releasedBusy = false
	} else if used {
		c.releasedBusy = true
	}
	dead = c.dead
	closed = idle && dead && !c.closed
	if closed {
		c.closed = true
	}
	c.mu.Unlock()
	if closed {
		c.cc.Close()
	}
	return idle, dead, closed
}

// confirmUnusable is asked when x/net refuses a new stream although none of
// ours is in use (in legacy mode only on judge.go's checker goroutine: it
// takes x/net's write lock): the connection is unusable if x/net says it is closing or
// closed, or if it has nothing in flight either (so it is not merely full).
// If x/net still finishes streams we already released (a response ended
// before its request body did), it is only full.
func (c *Conn) confirmUnusable() bool {
	st := c.cc.State()
	if st.Closed || st.Closing {
		return true
	}
	// Nothing in flight: unusable unless x/net was only full a moment ago
	// (a stream forgotten, or a reset acknowledged, since it refused).
	if st.StreamsActive+st.StreamsReserved+st.StreamsPending != 0 || c.cc.CanTakeNewRequest() {
		return false
	}
	// State and CanTakeNewRequest are two looks, not one: a request that
	// reserved the last stream between them makes a live connection look
	// refused with nothing in flight. Look at State again: that stream is
	// in it now (TestBodyCloseRacesEOFKeepsConn).
	st = c.cc.State()
	return st.Closed || st.Closing || st.StreamsActive+st.StreamsReserved+st.StreamsPending == 0
}

// setDeadLocked, called with c.mu held, marks the connection dead and,
// the first time, closes c.peer.died (closing a channel does not block).
func (c *Conn) setDeadLocked() {
	if !c.dead {
		c.dead = true
		close(c.peer.died)
	}
}

// markDead stops new slots and reports whether the caller must close the
// connection now (it is idle and nobody closed it yet).
func (c *Conn) markDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setDeadLocked()
	if c.busy > 0 || c.closed {
		return false
	}
	c.closed = true
	return true
}

// closeNow closes the x/net connection after markDead said so. It may run
// before NewClientConn stored cc; NewClientConn then closes it.
func (c *Conn) closeNow() {
	c.mu.Lock()
	cc := c.cc
	c.mu.Unlock()
	if cc != nil {
		cc.Close()
	}
}
