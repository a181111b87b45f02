package h2conn

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
)

// RoundTrip sends req on the connection in a slot taken by ReserveStream
// (without one it tries to take one, and fails with a *NotProcessedError if
// it cannot). The slot is released exactly once: on error, at once for a
// response without body, or when the body reaches EOF, fails, or is closed.
//
// req must be valid (ferry's transport validates before choosing a
// connection). RoundTrip fires httptrace GotConn; x/net fires the other
// per-request hooks. As net/http requires of a RoundTripper, req.Body is
// always closed, also on error: a caller that wants to resend an unread
// body (NotProcessedError.BodyUnread) must pass a wrapper whose Close it
// controls. Errors: *NotProcessedError when the server did not process the
// request (IsRetryable; ReasonStreamLimit when a slot granted before the
// server's SETTINGS found the connection full) and, built with Go 1.26,
// with ReasonProtocolReset when the server reset the stream with
// PROTOCOL_ERROR before the response headers: the server may have
// processed that request, and it is retryable only because Go 1.26's
// net/http sends it again. Otherwise x/net's error unchanged (the
// context's error when the request was cancelled; x/net's final "http2:
// client conn could not be established" when the connection closed before
// its first request). A GOAWAY, a PROTOCOL_ERROR reset, a connection x/net
// found unusable and "could not be established" also mark the connection
// dead (Usable reports false from then on); REFUSED_STREAM and
// ReasonStreamLimit leave it usable.
func (c *Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.o != nil {
		return c.o.roundTrip(req)
	}
	c.mu.Lock()
	if c.unstarted == 0 {
		c.mu.Unlock()
		if !c.ReserveStream() {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, &NotProcessedError{Reason: ReasonConnUnusable, BodyUnread: true, Err: errNoSlot}
		}
		c.mu.Lock()
	}
	c.unstarted--
	provisional := false
	if c.xres > 0 {
		c.xres-- // x/net consumes one reservation on this RoundTrip
	} else {
		provisional = !c.strict
	}
	if provisional {
		c.mu.Unlock()
		if err := c.confirmProvisional(req); err != nil {
			c.release(false)
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
		c.mu.Lock()
	}
	reused := c.rounds > 0
	c.rounds++
	if c.singleUse || asksToClose(req) {
		c.lastRound = true
	}
	wasIdle := reused && c.busy == 1
	idleSince := c.idleSince
	c.mu.Unlock()

	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.GotConn != nil {
		info := httptrace.GotConnInfo{Conn: c.nc, Reused: reused, WasIdle: wasIdle}
		if wasIdle {
			info.IdleTime = c.now().Sub(idleSince)
		}
		trace.GotConn(info)
	}

	resp, err := c.cc.RoundTrip(req)
	if err != nil {
		if peerProtocolReset(err) {
			c.markDead() // x/net will not reuse it; released below, closed then
		}
		err = classify(err)
		if np, ok := err.(*NotProcessedError); ok {
			c.judgeNotProcessed(np)
		} else if err.Error() == errTextNotEstablished {
			// The connection closed before its first stream. x/net goes
			// on offering it (it keeps a closed, never-used connection
			// for its pool to report, which drops it on this error), so
			// the check in release cannot see that it is dead.
			c.markDead()
		}
		c.release(true)
		return nil, err
	}
	c.peerFrameSeen()
	if isEmptyBody(resp.Body) {
		c.release(true)
		return resp, nil
	}
	resp.Body = &streamBody{
		body:       resp.Body,
		c:          c,
		closeAtEOF: req.Body == nil || req.Body == http.NoBody,
	}
	return resp, nil
}

// judgeNotProcessed decides, for a request x/net did not send, whether the
// connection is done for. A refused stream says nothing about the
// connection. Legacy x/net also refuses, with the same "not usable" error
// as for a closing connection, a request holding a reservation when the
// connection has meanwhile become full: a stream reset by a cancelled
// request counts against the limit until the server acknowledges the PING
// sent with the reset (and is counted twice until x/net has forgotten the
// stream), and a server may lower SETTINGS_MAX_CONCURRENT_STREAMS. Such a
// connection is alive and keeps its streams: the request is reported as
// ReasonStreamLimit (nothing was sent, so the caller waits for a stream or
// takes another connection) and the connection stays usable. The
// judgement never waits for x/net's write lock, which the reset being
// written may hold for long (judge.go): a connection ferry does not know
// to be unusable is taken as full, and checked on a goroutine of its own,
// which marks it dead if x/net says it is closing or closed. Strict limits
// make x/net wait for a stream instead of refusing, and so does wrapped
// x/net: there the error always means a dead connection.
func (c *Conn) judgeNotProcessed(np *NotProcessedError) {
	switch {
	case np.Reason == ReasonRefusedStream:
	case np.Reason == ReasonConnUnusable && refusesReservedWhenFull && !c.strict && !c.unusableNow():
		np.Reason = ReasonStreamLimit
	default:
		c.markDead()
	}
}

// asksToClose reports whether req asks to close the connection after it
// (Request.Close or a "close" token in Connection), after which x/net takes
// no new stream on the connection.
func asksToClose(req *http.Request) bool {
	if req.Close {
		return true
	}
	for _, v := range req.Header["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "close") {
				return true
			}
		}
	}
	return false
}

// xnetNoBody is the type of x/net's (unexported) empty response body; on
// Go 1.27 and later x/net passes on net/http's http.NoBody instead.
var xnetNoBody = struct{ pkg, name string }{"golang.org/x/net/http2", "noBodyReader"}

// bodyTypes remembers x/net's empty body type and the last other x/net
// body type seen (its stream body, or missingBody), so that telling them
// apart is one comparison of type descriptors: comparing the type's name
// and package costs about 100 ns per response. x/net's *gzipReader has no
// package path and is always checked by name; with Go 1.27, where x/net
// hands on net/http's bodies, nothing is remembered. Each holds a
// reflect.Type (an interface holding a pointer, so storing it allocates
// nothing). A slot only ever holds the verdict just computed for its type.
var bodyTypes struct {
	empty, stream atomic.Value
}

// isEmptyBody reports whether x/net returned a body that has no content and
// no stream behind it (HEAD, 204, 304, END_STREAM on the headers). It does
// not allocate (TestEmptyBodyVerdictsRemembered).
func isEmptyBody(b io.ReadCloser) bool {
	if b == nil || b == http.NoBody {
		return true
	}
	t := reflect.TypeOf(b)
	if seen, _ := bodyTypes.stream.Load().(reflect.Type); seen == t {
		return false
	}
	if seen, _ := bodyTypes.empty.Load().(reflect.Type); seen == t {
		return true
	}
	empty := t.Name() == xnetNoBody.name && t.PkgPath() == xnetNoBody.pkg
	if empty {
		bodyTypes.empty.Store(t)
	} else if t.PkgPath() == xnetNoBody.pkg {
		bodyTypes.stream.Store(t)
	}
	return empty
}

// streamBody is the response body: it releases the request's slot exactly
// once, before the caller sees EOF, on a read error, or on Close.
type streamBody struct {
	body io.ReadCloser
	c    *Conn
	// closeAtEOF: the request had no body, so at EOF the stream can be
	// closed (which waits until x/net has forgotten it, so the slot is free
	// in x/net's accounting too) without cutting an upload.
	closeAtEOF bool
	released   atomic.Bool
	// eofClosing: Read has begun closing x/net's body at EOF
	// (closeAtEOF); it guards that close so it happens once.
	eofClosing atomic.Bool
	// closedAtEOF: that close has returned (x/net has forgotten the
	// stream), so Close does not close the body again (a second Close
	// finds the stream done and returns nil, after taking x/net's locks
	// for nothing). A Close racing the close at EOF still closes the body
	// itself, which waits for x/net as before.
	closedAtEOF atomic.Bool
}

func (b *streamBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && !b.released.Load() {
		if err != io.EOF && peerProtocolReset(err) {
			b.c.markDead() // x/net will not reuse it; finish closes it once idle
		}
		if err == io.EOF && b.closeAtEOF && b.eofClosing.CompareAndSwap(false, true) {
			b.body.Close()
			b.closedAtEOF.Store(true)
		}
		b.finish()
	}
	return n, err
}

// Close ends the stream (resetting it if the body was not read to EOF) and
// releases the slot.
func (b *streamBody) Close() error {
	var err error
	if !b.closedAtEOF.Load() {
		err = b.body.Close()
	}
	b.finish()
	return err
}

func (b *streamBody) finish() {
	if b.released.CompareAndSwap(false, true) {
		b.c.release(true)
	}
}

// releaseXnetReservation gives back an x/net stream reservation that no
// request will use. x/net has no call for that; a RoundTrip whose context is
// already cancelled consumes the reservation without writing anything (x/net
// checks the context before encoding headers). It may spend a stream ID:
// x/net's select between its new-request lock and the cancelled context
// has both ready and takes the lock about half the time, assigning an ID
// before it sees the context (on an unused connection stream 1; doc.go,
// "Known gap").
func (c *Conn) releaseXnetReservation() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := (&http.Request{
		Method: http.MethodGet,
		URL:    &url.URL{Scheme: "https", Host: "reservation.invalid", Path: "/"},
		Header: http.Header{},
		Host:   "reservation.invalid",
	}).WithContext(ctx)
	if resp, err := c.cc.RoundTrip(req); err == nil {
		resp.Body.Close()
	}
}
