package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ferryhttp/ferry/altsvc"
	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/h3conn"
)

// HTTP/3 in the request flow. RoundTrip asks roundTripH3 first; it either
// answers the request over HTTP/3 or returns handled == false, and the
// request goes over TCP exactly as it would without HTTP/3.
//
// A request goes over HTTP/3 when all of these hold: the Transport allows it
// (h3Enabled), the URL is https, no proxy is used, it is not CONNECT or an
// Upgrade request (those need a byte stream), and the Alt-Svc cache has a
// live, not-broken "h3" alternative for the origin. Then:
//
//   - a pooled HTTP/3 connection to that alternative with a free stream is
//     used at once;
//   - otherwise the request joins the origin's QUIC dial in progress
//     (whatever alternative it goes to), or starts one to it, unless
//     maxConcurrentH3Dials are running: then it goes over TCP at once,
//     without waiting (h3dial.go). If a TCP connection to the origin is at
//     hand (an idle HTTP/1.1 one or an HTTP/2 one with a free stream), the
//     request takes it at once and the dial goes on in the background; if
//     not, the request waits for the dial until the head start ends
//     (h3conn.DefaultHeadStart after the dial began), then dials TCP. A
//     dial that fails marks the alternative broken and wakes its waiters,
//     who use TCP.
//
// Retries: a request the HTTP/3 connection did not send at all (GOAWAY, the
// connection went away before the headers left) goes over TCP unchanged,
// whatever its method; one the server refused unprocessed
// (H3_REQUEST_REJECTED, which RFC 9114 section 8.1 guarantees was not
// processed) goes over TCP, whatever its method, when its body can be
// produced again: no body, or GetBody (as x/net does for HTTP/2's
// REFUSED_STREAM). Otherwise it fails with an error saying so that wraps
// the *h3conn.RetryableError. One that got no response because its
// connection judged its network path dead (h3conn.ErrPathDead: its packets
// went unacknowledged) may have been processed: it goes over TCP only when
// it is replayable as net/http defines it (GET, HEAD, OPTIONS, TRACE or an
// Idempotency-Key, with no body or GetBody), the rule net/http applies to
// a reused connection that broke before any response byte. The connection
// has then left the pool and the alternative is marked broken (h3dial.go).
// Any other failure is returned.

// errQUICLate closes the open QUIC dial phases of a request that stopped
// waiting for the handshake when the head start ended.
var errQUICLate = fmt.Errorf("ferry/transport: QUIC handshake not done when the head start ended; request sent over TCP: %w", h3conn.ErrHeadStartExpired)

// roundTripH3 sends req over HTTP/3 if it should go there. handled is false
// when the request is to go over TCP; o may then carry a body rewound by
// GetBody. When handled is true, req.Body has been closed on error.
func (t *Transport) roundTripH3(req *http.Request, o *h1conn.Outgoing, key connKey) (resp *http.Response, err error, handled bool) {
	if key.scheme != "https" || key.proxied() || !t.h3Enabled() ||
		o.Method == "CONNECT" || h1conn.IsUpgradeRequest(req.Header) {
		return nil, nil, false
	}
	h := t.h3init()
	if h.cache.Empty() {
		return nil, nil, false // no server advertised HTTP/3: skip the origin
	}
	origin, oerr := altsvc.OriginFromHostPort("https", key.addr)
	if oerr != nil {
		return nil, nil, false
	}
	alt, ok := h.cache.Usable(origin, "h3")
	if !ok {
		return nil, nil, false
	}
	// GetConn fires here, once, before any wait (h3conn.DialEvents).
	if o.Trace != nil && o.Trace.GetConn != nil {
		o.Trace.GetConn(key.addr)
	}
	hk := h3Key{origin: origin, altHost: alt.Host, altPort: alt.Port}
	c, err := t.h3Conn(req, o, h, hk, key, alt)
	if err != nil {
		closeOutgoing(o)
		return nil, err, true
	}
	if c == nil {
		o.GetConnFired = true // this attempt goes on over TCP
		return nil, nil, false
	}
	if h.beforeSend != nil {
		h.beforeSend(c)
	}
	return t.sendH3(c, req, o, key)
}

// h3Conn returns an HTTP/3 connection with a stream reserved for the
// request, or nil when the request should use TCP. It fails only when the
// request ended while it waited for the QUIC dial (or, with
// MaxConnsPerHost, for a QUIC stream or slot: h3ConnLimited).
func (t *Transport) h3Conn(req *http.Request, o *h1conn.Outgoing, h *h3Client, hk h3Key, key connKey, alt altsvc.Alternative) (*h3conn.Conn, error) {
	if t.MaxConnsPerHost > 0 {
		return t.h3ConnLimited(req, o, h, hk, key)
	}
	return t.h3ConnOnce(req, o, h, hk, key, alt)
}

// h3ConnOnce is one look for an HTTP/3 connection: a pooled one, or the
// QUIC dial in progress or started now, waited for up to its head start.
func (t *Transport) h3ConnOnce(req *http.Request, o *h1conn.Outgoing, h *h3Client, hk h3Key, key connKey, alt altsvc.Alternative) (*h3conn.Conn, error) {
	if s, ok := h.pool.GetShared(hk); ok {
		return s.(*h3conn.Conn), nil
	}
	ev := h3conn.NewDialEvents(o.Trace)
	f, started := t.joinH3Flight(h, hk, alt, ev, key)
	if f == nil {
		return nil, nil
	}
	if !started {
		ev = nil // another request's dial: its hooks are not ours
	}
	select {
	case <-f.Done():
		ev.Drain()
	default:
		if t.tcpAtHand(key) {
			ev.Detach()
			return nil, nil // QUIC goes on in the background
		}
		if f.HeadStartLeft() <= 0 {
			ev.Detach()
			return nil, nil // the head start is spent: QUIC is late or lost
		}
		h.waits.Add(1)
		if done, err := f.Wait(req, ev, h.headStartTimer, errQUICLate, errRequestCanceled); !done {
			return nil, err
		}
	}
	if f.Err() != nil {
		return nil, nil
	}
	// f.Key, not hk: the origin's flight may have gone to another of its
	// alternatives than the one this request looked up.
	if s, ok := h.pool.GetShared(f.Key); ok {
		return s.(*h3conn.Conn), nil
	}
	return nil, nil
}

// tcpAtHand reports whether key has a pooled TCP connection a request can
// take at once: an idle HTTP/1.1 one, or an HTTP/2 one with a free stream
// (probed by reserving a stream and giving it back). Another request may
// take it first; then this one dials, as it would have without HTTP/3.
func (t *Transport) tcpAtHand(key connKey) bool {
	if t.pool.IdleLen(key) > 0 {
		return true
	}
	s, ok := t.pool.GetShared(key)
	if !ok {
		return false
	}
	if r, ok := s.(interface{ ReleaseStream() }); ok {
		r.ReleaseStream()
	}
	return true
}

// retryDeadPath decides for a request that got no response because its
// connection judged its path dead (err wraps h3conn.ErrPathDead): the
// server may have received it, so it goes over TCP only when net/http
// would send it again after a reused connection broke before any response
// byte (isReplayable), with its body rewound by GetBody.
func (t *Transport) retryDeadPath(req *http.Request, o *h1conn.Outgoing, err error) (*http.Response, error, bool) {
	if !h1conn.IsReplayable(req) {
		return nil, fmt.Errorf("ferry/transport: HTTP/3 connection lost before the response (its network path stopped acknowledging); "+
			"not sent again because the server may have processed it and it is not replayable "+
			"(its method is not GET, HEAD, OPTIONS or TRACE and it has no Idempotency-Key, or its body cannot be rewound: Request.GetBody is nil): %w", err), true
	}
	if o.Body != nil {
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, fmt.Errorf("ferry/transport: rewinding the body of a request lost with its HTTP/3 connection: %w", gerr), true
		}
		o.Body = body
	}
	t.stats.countRetry()
	return nil, nil, false
}

// h3Request is the transport's state for one HTTP/3 request: the
// exchange (h3conn.Exchange: Request.Cancel, ResponseHeaderTimeout, the
// 100-continue gate), its CancelRequest entry and, with MaxConnsPerHost,
// its connection's slot (maxconns.go). It is the exchange's Owner.
type h3Request struct {
	ex    h3conn.Exchange
	reg   *cancelRegistry
	entry cancelEntry
	slot  *h3ExchangeSlot // nil without MaxConnsPerHost
}

func (r *h3Request) ExchangeStarted(req *http.Request, cancel context.CancelCauseFunc) {
	r.entry = cancelEntry{Req: req, Stop: cancel}
	r.reg.Register(&r.entry)
}

func (r *h3Request) ExchangeEnded() {
	r.reg.Unregister(&r.entry)
	if r.slot != nil {
		r.slot.quicStreamDone()
	}
}

// sendH3 sends req on c (a stream is reserved for it) and applies the
// retry rules above.
func (t *Transport) sendH3(c *h3conn.Conn, req *http.Request, o *h1conn.Outgoing, key connKey) (*http.Response, error, bool) {
	r := &h3Request{reg: &t.cancels}
	r.ex = h3conn.Exchange{
		Trace: o.Trace, Body: o.Body, ExpectContinue: o.ExpectContinue,
		HeaderTimeout: t.ResponseHeaderTimeout, ContinueTimeout: t.ExpectContinueTimeout,
		Canceled: errRequestCanceled, TimedOut: errHeaderTimeout, Owner: r,
	}
	if t.MaxConnsPerHost > 0 {
		r.slot = &h3ExchangeSlot{t: t, conn: c, key: key}
	}
	resp, err := r.ex.Send(c, req)
	if err != nil {
		if errors.Is(err, h3conn.ErrPathDead) {
			return t.retryDeadPath(req, o, err)
		}
		var re *h3conn.RetryableError
		if !errors.As(err, &re) {
			return nil, err, true
		}
		if re.Unsent {
			t.stats.countRetry()
			return nil, nil, false // untouched: TCP takes it as it is
		}
		if o.Body != nil && req.GetBody == nil {
			return nil, fmt.Errorf("ferry/transport: HTTP/3 server refused the request unprocessed; "+
				"not sent again because its body cannot be rewound (Request.GetBody is nil): %w", err), true
		}
		if o.Body != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, fmt.Errorf("ferry/transport: rewinding the body of a request the HTTP/3 server refused: %w", gerr), true
			}
			o.Body = body
		}
		t.stats.countRetry()
		return nil, nil, false
	}
	t.stats.countRequest(protoH3)
	t.noteAltSvc(key, resp)
	return resp, nil, true
}
