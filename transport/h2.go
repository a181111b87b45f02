package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/ferryhttp/ferry/internal/dialflight"
	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/h2conn"
	"github.com/ferryhttp/ferry/internal/idlepool"
)

// HTTP/2 in the transport. A key that may share a connection (protocols.go,
// connKey.h1Only false) asks the pool for a shared connection with a free
// stream first; on a miss the dial is coalesced with concurrent ones for
// the same key (internal/dialflight) and, when TLS negotiated "h2" (or the
// key is h2c), the connection becomes an h2conn.Conn (in an h2Shared, which keeps the
// socket for the requests' socket options) registered with pool.AddShared.
// Requests the server provably did not process are retried on another
// connection (roundTripShared).

// sharedConn is a pooled connection that serves many requests at once: an
// *h2Shared (an HTTP/2 connection), or an *altShared around a caller's
// TLSNextProto RoundTripper. Both know the socket under them
// (socketCarrier), for the requests' socket options (sockopts.go).
type sharedConn interface {
	idlepool.SharedConn
	// RoundTrip sends a request in a stream reserved by ReserveStream.
	RoundTrip(*http.Request) (*http.Response, error)
	// ReleaseStream gives back a reserved stream that will not be used.
	ReleaseStream()
}

var (
	_ sharedConn    = (*h2Shared)(nil)
	_ sharedConn    = (*altShared)(nil)
	_ socketCarrier = (*h2Shared)(nil)
	_ socketCarrier = (*altShared)(nil)
)

// h2Shared is an HTTP/2 connection with the socket it runs over.
type h2Shared struct {
	*h2conn.Conn
	sock connSocket
}

func (c *h2Shared) socket() *connSocket { return &c.sock }

// altShared is a caller's TLSNextProto RoundTripper with the socket of the
// *tls.Conn it was given.
type altShared struct {
	*altConn
	sock connSocket
}

func (c *altShared) socket() *connSocket { return &c.sock }

// h2State is the Transport's HTTP/2 state, built by init.
type h2State struct {
	protos  protoSet
	cfg     h2conn.Config
	flights dialflight.Table[connKey]
	live    sharedRegistry
	// clock, when set before first use (tests only), is the pool's and
	// every HTTP/2 connection's clock. Nil means time.Now.
	clock func() time.Time
	// backoffUnit scales the waits between retries (tests only); zero
	// means one second.
	backoffUnit time.Duration
	// backoffWait, when set (tests only), stands for the timer of a wait
	// between retries: the wait ends when the returned channel receives
	// (or the context ends). It is given the wait's length.
	backoffWait func(time.Duration) <-chan time.Time
	// backoffStarted, when set (tests only), runs when a wait between
	// retries begins, with the retry's number.
	backoffStarted func(retry int)
	// beforeFirstStream, when set (tests only), runs on each new shared
	// connection before its first stream is reserved.
	beforeFirstStream func(sharedConn)
	// beforeSettingsWait, when set (tests only), runs when the leader of a
	// dial asks a connection of its key whether to wait for the server's
	// SETTINGS (sharedBeforeDial).
	beforeSettingsWait func()
	// settingsWaitFound, when set (tests only), runs when sharedBeforeDial
	// found a stream in the pool after a wait for SETTINGS, before it
	// returns it.
	settingsWaitFound func()
}

// maxSharedRetries caps the transparent retries of one request whose
// attempts the server did not process (GOAWAY, REFUSED_STREAM, a connection
// that became unusable before the request went out): seven, so eight
// attempts in all, as net/http's HTTP/2 client makes.
const maxSharedRetries = 7

// maxLimitRefusals caps the stream-limit refusals (see roundTripShared) one
// request retries at once and uncounted; later ones are counted retries,
// with their backoff. Each such refusal needs an event on the connection
// after its stream was granted, so a few in a row are already unlikely;
// the cap only keeps a connection that kept refusing from spinning a
// request.
const maxLimitRefusals = 8

// sharedAttempts is what RoundTrip keeps for roundTripShared across one
// request's attempts over shared connections.
type sharedAttempts struct {
	retries       int // counted retries so far (at most maxSharedRetries)
	limitRefusals int // stream-limit refusals retried at once, uncounted
	// pooledH2: an https request that has only ever taken pooled
	// connections at its first look, which net/http serves through its
	// registered HTTP/2 round tripper (see roundTripShared).
	pooledH2 bool
}

// errH2NotEstablished is returned when a connection that has just been set
// up for HTTP/2 is already unusable before its first request (the server
// closed it, sent something other than HTTP/2, or sent GOAWAY): net/http's
// text for the same case. It does not say which of these happened, as
// internal/h2conn does not report the error that ended the connection.
var errH2NotEstablished = errors.New("http2: client conn could not be established")

// errRetryShared tells RoundTrip's loop to get another connection.
var errRetryShared = errors.New("ferry/transport: retry on another connection")

// initH2 computes the protocol set and the HTTP/2 connection settings.
func (t *Transport) initH2() {
	t.h2.protos = computeProtocols(t)
	t.h2.cfg = h2conn.Config{
		HTTP2:                  t.HTTP2,
		MaxResponseHeaderBytes: t.MaxResponseHeaderBytes,
		DisableCompression:     t.DisableCompression,
		DisableKeepAlives:      t.DisableKeepAlives,
		ExpectContinueTimeout:  t.ExpectContinueTimeout,
		ResponseHeaderTimeout:  t.ResponseHeaderTimeout,
		// With MaxConnsPerHost a request that finds every connection full
		// waits in the pool, which each connection wakes when a stream
		// frees (OnStreamFree in dialAny).
		Clock: t.h2.clock,
	}
}

// dialAny dials for key with the pool slot the caller holds. It returns an
// HTTP/1 connection holding the slot, or a shared connection (the slot
// moved to it, one stream reserved for the caller), or again = true when
// the caller's slot was released without a dial: with a shared connection
// from the pool, one stream reserved for the caller (sharedBeforeDial
// found it), or without one when the caller should look in the pool once
// more (a concurrent dial produced a shared connection, or the caller was
// cancelled while waiting for a connection's SETTINGS). It waits under
// w.ctx; waits for a server's SETTINGS (its own as the leader, or a
// leader's it follows) start w's ResponseHeaderTimeout too. On error the
// caller releases the slot.
func (t *Transport) dialAny(w *connWait, key connKey, ds *dialState) (*h1Conn, sharedConn, bool, error) {
	ctx := w.ctx
	if key.h1Only {
		pc, err := t.dialConn(ctx, key, ds)
		return pc, nil, false, err
	}
	var f *dialflight.Flight
	leader := false
	if !t.DisableKeepAlives {
		f, leader = t.h2.flights.Join(key)
	}
	if f != nil && !leader {
		awaiting := f.Awaiting()
		for waiting := true; waiting; {
			select {
			case <-f.Done():
				waiting = false
			case <-awaiting:
				// The leader waits for a server's SETTINGS, and so,
				// through it, does this request.
				w.startSettingsWait()
				awaiting = nil
			case <-ctx.Done():
				return nil, nil, false, context.Cause(ctx)
			}
		}
		if f.Shared() {
			t.releaseTCPSlot(key)
			return nil, nil, true, nil
		}
		f = nil // it spoke HTTP/1 or failed: dial our own, as net/http does
	}
	outcome := dialflight.Failed
	defer func() {
		if leader {
			t.h2.flights.Finish(key, f, outcome)
		} else if outcome != dialflight.Failed {
			t.h2.flights.Record(key, outcome)
		}
	}()
	if leader {
		sc, err := t.sharedBeforeDial(w, f, key)
		if sc != nil || err != nil {
			// The stream, if any, is the caller's: given back and taken
			// again, the connection could count it a moment longer and
			// a connection be dialled meanwhile. On error (cancelled) the
			// caller's next look in the pool returns it.
			t.releaseTCPSlot(key)
			outcome = dialflight.Shared // followers look in the pool too
			return nil, sc, true, nil
		}
	}
	d, err := t.dialRaw(ctx, key, ds)
	if err != nil {
		return nil, nil, false, err
	}
	sc, err := t.sharedFromDial(key, d)
	if err != nil {
		return nil, nil, false, err
	}
	if sc == nil {
		outcome = dialflight.SpokeH1
		return newH1Conn(t, key, d), nil, false, nil
	}
	// Take our stream before anyone else can see the connection.
	if t.h2.beforeFirstStream != nil {
		t.h2.beforeFirstStream(sc)
	}
	if !sc.ReserveStream() {
		sc.Close()
		return nil, nil, false, errH2NotEstablished
	}
	if c, ok := sc.(*h2Shared); ok && t.MaxConnsPerHost > 0 {
		// Requests wait in the pool for a stream of this connection.
		c.OnStreamFree(func() {
			t.pool.StreamReleased(key)
			t.tcpSlotEvent()
		})
	}
	// A dead connection the registry forgets leaves the pool as well:
	// left there, only a GetShared walking past it would drop it, and
	// CloseIdleConnections, which walks the registry, never would (single
	// use connections ended while another request dialled stayed counted
	// in Stats for good).
	if gone := t.h2.live.add(sc, key); len(gone) > 0 {
		for _, e := range gone {
			t.pool.RemoveShared(e.key, e.c)
		}
		t.tcpSlotEvent()
	}
	t.pool.AddShared(key, sc)
	outcome = dialflight.Shared
	return nil, sc, false, nil
}

// sharedBeforeDial looks in the pool once more before the leader of a dial
// for key dials. The flight that ended just before this one began may have
// added a connection after the caller looked; and with MaxConnsPerHost (the
// OnStreamFree hook) a new connection refuses a second stream until the
// server's SETTINGS are known, which does not mean it is full: the leader
// waits for them (h2conn AwaitPeerSettings), as requests beyond the first
// of a new connection wait for its SETTINGS without a limit, and looks
// again. Either way it does not dial a connection net/http would not have
// dialled. It returns a shared connection with a stream reserved, nil if
// there is none to be had, or w.ctx's error if it ended during a wait
// (also when the request's ResponseHeaderTimeout passed: the wait for
// SETTINGS is bounded by it, startSettingsWait). Only
// dials pay for it (the registry's snapshot, with MaxConnsPerHost).
func (t *Transport) sharedBeforeDial(w *connWait, f *dialflight.Flight, key connKey) (sharedConn, error) {
	if s, ok := t.pool.GetShared(key); ok {
		return s.(sharedConn), nil
	}
	if t.MaxConnsPerHost <= 0 {
		return nil, nil // no hook: no stream is refused for want of SETTINGS
	}
	for _, e := range t.h2.live.snapshot() {
		c, ok := e.c.(*h2Shared)
		if !ok || e.key != key {
			continue
		}
		if t.h2.beforeSettingsWait != nil {
			t.h2.beforeSettingsWait()
		}
		if c.PeerSettingsPending() {
			// Waits net/http does not make: bounded by the
			// request's ResponseHeaderTimeout, its followers' too.
			w.startSettingsWait()
			f.StartAwaiting()
		}
		if _, err := c.AwaitPeerSettings(w.ctx); err != nil {
			return nil, err
		}
		// Look again whether or not there was anything to wait for: the
		// SETTINGS may have arrived between the look that found no stream
		// and this call, which then returns at once (1 run in 20-40 of
		// TestH2SecondStreamWaitsForSettingsUnderMaxConns dialled a
		// second connection that way). Only dials pay for the look.
		if s, ok := t.pool.GetShared(key); ok {
			if t.h2.settingsWaitFound != nil {
				t.h2.settingsWaitFound()
			}
			return s.(sharedConn), nil
		}
	}
	return nil, nil
}

// sharedFromDial turns a connection just dialled for a shared key into a
// shared connection when it speaks HTTP/2 (or the caller's TLSNextProto
// claims its protocol); nil, nil means it stays HTTP/1 (the caller builds
// the h1Conn only then). On error the connection is closed.
func (t *Transport) sharedFromDial(key connKey, d dialedConn) (sharedConn, error) {
	ps := &t.h2.protos
	proto := ""
	if d.tlsState != nil {
		proto = d.tlsState.NegotiatedProtocol
	}
	if fn := ps.nextProto[proto]; proto != "" && fn != nil {
		if tc, ok := d.conn.(*tls.Conn); ok {
			rt := fn(key.addr, tc)
			if e, ok := rt.(interface{ RoundTripErr() error }); ok {
				return nil, e.RoundTripErr() // the function closed the connection
			}
			if rt == nil {
				tc.Close()
				return nil, errors.New("ferry/transport: TLSNextProto[" + proto + "] returned a nil RoundTripper")
			}
			return &altShared{altConn: newAltConn(rt), sock: connSocket{conn: d.conn, guard: d.guard}}, nil
		}
	}
	switch {
	case proto == "h2":
	case d.tlsState == nil && key.scheme == "http" && ps.h2c:
	default:
		return nil, nil
	}
	c, err := h2conn.NewClientConn(d.conn, t.h2.cfg)
	if err != nil {
		return nil, err
	}
	return &h2Shared{Conn: c, sock: connSocket{conn: d.conn, guard: d.guard}}, nil
}

// roundTripShared sends req on sc (a stream is reserved). It returns the
// response, a final error (req's body closed), or errRetryShared when the
// server did not process the request and it may go out again (o.Body then
// holds the body to send). The final errors are net/http's: the error of
// the last attempt once the retries are spent, "cannot retry" around it
// for a body that cannot be sent again, the context's error when it ends
// during the backoff.
func (t *Transport) roundTripShared(ctx context.Context, req *http.Request, o *h1conn.Outgoing, key connKey, sc sharedConn, att *sharedAttempts) (*http.Response, error) {
	sreq := req
	var rb *h2conn.ReplayBody
	if o.Body != nil {
		// The connection closes the body on every error; the wrapper keeps an unread
		// body open until we know whether it is sent again.
		rb = h2conn.NewReplayBody(o.Body)
		if o.SyncBody { // known in memory, with GetBody: see h1conn.WritesInline
			if n, ok := h1conn.InMemoryLen(o.Body); ok && int64(n) == o.ContentLength {
				rb.MarkInMemory() // a small one goes out with the HEADERS
			}
		}
		r2 := *req
		r2.Body = rb
		r2.GetBody = nil
		sreq = &r2
	}
	resp, err := sc.RoundTrip(sreq)
	if err == nil {
		rb.Settle()
		resp.Request = req
		if _, ok := sc.(*h2Shared); ok && att.pooledH2 && rb != nil {
			// net/http hands such a request to its HTTP/2 round tripper
			// as a copy whose Body tracks reads (setupRewindBody), and
			// that copy is resp.Request: the same here, with the body
			// as sent.
			rr := *req
			rr.Body = rb
			resp.Request = &rr
		}
		return resp, nil
	}
	if !sc.Usable() {
		t.pool.RemoveShared(key, sc)
		t.tcpSlotEvent()
	}
	var np *h2conn.NotProcessedError
	if !errors.As(err, &np) {
		rb.CloseBody()
		return nil, err
	}
	// A granted stream the connection had no room for when the request
	// was to go out (SETTINGS that arrived after the grant, or a stream
	// just reset by a cancelled request and counted until the server
	// acknowledges it) is not a retry: nothing was sent, the
	// body is unread and the connection is still usable. The request looks
	// again at once (it waits for a stream under MaxConnsPerHost, else
	// takes another connection). Each refusal needs an event after the
	// grant and each new grant needs room, so this should not repeat; the
	// first maxLimitRefusals are retried so, any further one is a counted
	// retry (with its backoff) in case a connection keeps refusing.
	limit := np.Reason == h2conn.ReasonStreamLimit && att.limitRefusals < maxLimitRefusals
	if !limit && att.retries >= maxSharedRetries {
		rb.CloseBody()
		return nil, np.Err
	}
	if o.Body != nil && req.GetBody == nil && !np.BodyUnread {
		rb.CloseBody()
		return nil, fmt.Errorf("http2: Transport: cannot retry err [%w] after Request.Body was written; define Request.GetBody to avoid this error", np.Err)
	}
	if err := ctx.Err(); err != nil {
		rb.CloseBody()
		return nil, err
	}
	if limit {
		att.limitRefusals++
		rb.Detach() // another connection takes it at once, no backoff
		return nil, errRetryShared
	}
	att.retries++
	if o.Body != nil && req.GetBody == nil {
		rb.Detach() // unread: the same body goes out again
	} else if rb != nil {
		rb.CloseBody()
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, gerr
		}
		o.Body = body
	}
	if err := t.h2.retryBackoff(ctx, att.retries); err != nil {
		closeOutgoing(o)
		return nil, err
	}
	return nil, errRetryShared
}

// retryBackoff waits before the n-th retry (see sharedRetryWait; the unit
// is a second unless backoffUnit is set). When ctx ends first it returns
// ctx.Err(), not the context's cause, as net/http's HTTP/2 retry loop does.
func (h *h2State) retryBackoff(ctx context.Context, n int) error {
	unit := h.backoffUnit
	if unit <= 0 {
		unit = time.Second
	}
	d := sharedRetryWait(n, unit, rand.Float64())
	if d == 0 {
		return nil
	}
	if h.backoffStarted != nil {
		h.backoffStarted(n)
	}
	var done <-chan time.Time
	if h.backoffWait != nil {
		done = h.backoffWait(d)
	} else {
		tm := time.NewTimer(d)
		defer tm.Stop()
		done = tm.C
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sharedRetryWait is the wait before the n-th retry (from 1), so that a
// server refusing streams is not hammered: none before the first, then 1,
// 2, 4 ... 32 units, each lengthened by jitter (in [0, 1)) times 10% and
// then cut to whole units, which is what net/http's HTTP/2 client waits
// (its jitter only shows from the 16-unit wait on).
func sharedRetryWait(n int, unit time.Duration, jitter float64) time.Duration {
	if n <= 1 {
		return 0
	}
	units := float64(int64(1) << (n - 2))
	units += units * 0.1 * jitter
	return unit * time.Duration(units)
}

// settingsPending reports whether a live HTTP/2 connection of key refuses
// a second stream only until the server's SETTINGS are known (only with
// MaxConnsPerHost, which installs the OnStreamFree hook). Called when a
// request is about to wait in the pool, never on a pool hit.
func (t *Transport) settingsPending(key connKey) bool {
	for _, e := range t.h2.live.snapshot() {
		if c, ok := e.c.(*h2Shared); ok && e.key == key && c.PeerSettingsPending() {
			return true
		}
	}
	return false
}

// closeIdleShared closes the shared connections with no stream in use and
// forgets those that are no longer usable (CloseIdleConnections).
func (t *Transport) closeIdleShared() {
	for _, e := range t.h2.live.snapshot() {
		switch c := e.c.(type) {
		case idlepool.IdleCloser:
			if c.CloseIfIdle() {
				t.pool.RemoveShared(e.key, e.c)
				t.h2.live.remove(e.c)
				continue
			}
		case *altShared:
			c.closeIdle()
			t.pool.RemoveShared(e.key, e.c)
			t.h2.live.remove(e.c)
			continue
		}
		if !e.c.Usable() {
			t.pool.RemoveShared(e.key, e.c)
			t.h2.live.remove(e.c)
		}
	}
}
