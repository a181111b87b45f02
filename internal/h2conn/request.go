package h2conn

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"

	"github.com/ferryhttp/ferry/internal/sockio"
)

// RoundTrip on the own connection: take the slot, open the stream (waiting
// for the peer's SETTINGS or, with strict limits, for a free stream when it
// has to), write HEADERS, start the body, and wait for the response head.

// roundTrip is Conn.RoundTrip for the own connection.
func (c *clientConn) roundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	// Without a reserved slot, one is taken here under the same lock
	// that uses it, so concurrent RoundTrips cannot take each other's.
	if c.reserved == 0 && !c.reserveLocked() {
		c.mu.Unlock()
		closeReqBody(req)
		return nil, &NotProcessedError{Reason: ReasonConnUnusable, BodyUnread: true, Err: errNoSlot}
	}
	c.reserved--
	reused := c.rounds > 0
	c.rounds++
	wasIdle := reused && c.busy == 1 && len(c.streams) == 0
	idleSince := c.idleSince
	c.mu.Unlock()

	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.GotConn != nil {
		info := httptrace.GotConnInfo{Conn: sockio.Unwrap(c.nc), Reused: reused, WasIdle: wasIdle}
		if wasIdle {
			info.IdleTime = c.now().Sub(idleSince)
		}
		trace.GotConn(info)
	}

	cs := &stream{c: c, req: req, ctx: ctx, trace: trace,
		isHead: req.Method == http.MethodHead, slotHeld: true, remain: -1}
	cs.cond.L = &c.mu
	if !requestWrittenAtOnce(req) {
		cs.body = req.Body
	}
	head, err := c.checkRequest(req)
	if err != nil {
		return nil, c.failBeforeOpen(cs, err)
	}
	cs.head = head
	if err := ctx.Err(); err != nil {
		// Done already: nothing is sent (as net/http), where the
		// response could otherwise beat the cancellation, which the
		// context's AfterFunc below does on a goroutine of its own.
		return nil, c.failBeforeOpen(cs, err)
	}
	if cs.body != nil && c.continueTimeout > 0 && expectsContinue(req) {
		cs.expect = true
		cs.on100 = make(chan struct{}, 1)
	}
	// inline: the body goes out with the HEADERS unless openStream finds
	// no window for it (it then makes ready itself).
	cs.inline = inlineCandidate(cs)
	if (cs.body != nil && !cs.inline) || c.headerTimeout > 0 || req.Cancel != nil {
		cs.ready = make(chan struct{})
	}
	if err := c.openStream(cs); err != nil {
		return nil, c.failBeforeOpen(cs, err)
	}
	if ctx.Done() != nil {
		// A context that can never end (Background and the like) needs
		// no watch.
		cs.stopCtx = context.AfterFunc(ctx, func() { c.cancelStream(cs, ctx.Err()) })
	}

	if cs.body != nil && !cs.inline {
		cs.wroteReq = make(chan struct{})
		go c.writeBody(cs)
	} else {
		if cs.inline {
			cs.closeBody() // written whole: net/http closes it now
		}
		if trace != nil && trace.WroteRequest != nil {
			trace.WroteRequest(httptrace.WroteRequestInfo{})
		}
	}
	return c.awaitResponse(cs)
}

// failBeforeOpen ends a request that never got a stream.
func (c *clientConn) failBeforeOpen(cs *stream, err error) error {
	closeReqBody(cs.req)
	c.releaseSlotOf(cs)
	c.notifyFree()
	return err
}

func closeReqBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// expectsContinue reports an "Expect: 100-continue" request.
func expectsContinue(req *http.Request) bool {
	for _, v := range req.Header["Expect"] {
		if strings.EqualFold(strings.TrimSpace(v), "100-continue") {
			return true
		}
	}
	return false
}

// openStream waits until the stream may be opened, then assigns its ID and
// writes its HEADERS (with END_STREAM when there is no body). It fails with
// a *NotProcessedError (nothing sent) when the connection can take no
// stream.
func (c *clientConn) openStream(cs *stream) error {
	var size uint64
	eachRequestField(cs.req, &cs.head, func(name, value string) { size += fieldSize(name, value) })
	closes := c.singleUse || asksToClose(cs.req)
	var stopWake func() bool
	defer func() {
		if stopWake != nil {
			stopWake()
		}
	}()
	for {
		if err := c.awaitSettingsFor(cs); err != nil {
			return err
		}
		c.wmu.Lock()
		c.mu.Lock()
		if err := c.openableLocked(size); err != nil {
			c.mu.Unlock()
			c.wmu.Unlock()
			return err
		}
		if !c.settled && c.lastOpened > 0 {
			// SETTINGS still pending for a second stream: wait above.
			c.mu.Unlock()
			c.wmu.Unlock()
			continue
		}
		if !c.roomLocked(0) {
			c.wmu.Unlock()
			if !c.strict {
				c.mu.Unlock()
				return &NotProcessedError{Reason: ReasonStreamLimit, BodyUnread: true, Err: errStreamLimit}
			}
			// Strict limits: wait for a stream to end.
			if stopWake == nil {
				ctx := cs.ctx
				stopWake = context.AfterFunc(ctx, func() {
					c.mu.Lock()
					c.wake.Broadcast()
					c.mu.Unlock()
				})
			}
			if err := cs.ctx.Err(); err != nil {
				c.mu.Unlock()
				return err
			}
			c.wake.Wait()
			c.mu.Unlock()
			continue
		}
		cs.id = c.nextID
		c.nextID += 2
		c.lastOpened = cs.id
		c.streams[cs.id] = cs
		cs.sendWindow = c.peerWindow
		cs.recvAvail = c.streamWindow
		if cs.inline && !c.takeInlineWindowLocked(cs) {
			// No room for the whole body now: writeBody sends it as
			// the windows open.
			cs.inline = false
			if cs.ready == nil {
				cs.ready = make(chan struct{})
			}
		}
		if cs.body == nil || cs.inline {
			cs.sentEnd = true // the HEADERS or the inline DATA end the request
		}
		if closes {
			c.setDeadLocked()
		}
		maxFrame := c.peerMaxFrame
		c.mu.Unlock()

		var inlineBufp *inlineBuf
		var inlineData []byte
		if cs.inline {
			// Read before anything is written: a body that cannot be read
			// leaves nothing of the stream on the wire.
			var err error
			if inlineBufp, inlineData, err = readInlineBody(cs); err != nil {
				c.wmu.Unlock()
				c.mu.Lock()
				connInc, closeNow := c.dropUnsentLocked(cs, err)
				c.mu.Unlock()
				c.afterForget(connInc, closeNow)
				return err
			}
		}
		c.encodeRequestLocked(cs)
		err := c.writeHeaderBlockLocked(cs.id, cs.body == nil, maxFrame)
		if err == nil && cs.trace != nil && cs.trace.WroteHeaders != nil {
			// Before the flush: once the server has the headers the
			// reader may fire the response's hooks (a 100 Continue)
			// before this goroutine goes on.
			cs.trace.WroteHeaders()
		}
		if err == nil && cs.inline {
			if err = c.fr.WriteData(cs.id, true, inlineData); err != nil {
				c.werr = err
			}
		}
		if err == nil {
			err = c.flushLocked()
		}
		c.wmu.Unlock()
		if inlineBufp != nil {
			inlineBufPool.Put(inlineBufp)
		}
		if err != nil {
			c.mu.Lock()
			c.abortLocked(cs, err, 0)
			connInc, closeNow := c.forgetLocked(cs)
			c.mu.Unlock()
			c.afterForget(connInc, closeNow)
			c.closeWith(errClientConnLost)
			return &NotProcessedError{Reason: ReasonConnUnusable, BodyUnread: !cs.inline, Err: err}
		}
		return nil
	}
}

// openableLocked reports why no stream can be opened now, nil if one can
// (room aside); c.mu held.
func (c *clientConn) openableLocked(size uint64) error {
	if !c.usableLocked() {
		if c.readErr != nil && !c.peerSettings && !c.goAway {
			// The connection ended before the server's SETTINGS: it was
			// never established. As in net/http, the request fails with
			// that and is not sent again on another connection.
			return errClientConnNotEstablished
		}
		return &NotProcessedError{Reason: ReasonConnUnusable, BodyUnread: true, Err: errClientConnUnusable}
	}
	if c.peerMaxHeaders != 0 && size > uint64(c.peerMaxHeaders) {
		return errRequestHeaderListSize
	}
	return nil
}

// awaitSettingsFor waits, for any stream but the connection's first, until
// the peer's SETTINGS are known (at most until giveUpOnSettings), bounded
// by the request's context, Cancel and ResponseHeaderTimeout (net/http
// would have sent the request already and timed it out so).
func (c *clientConn) awaitSettingsFor(cs *stream) error {
	c.mu.Lock()
	wait := !c.settled && c.lastOpened > 0 && !c.dead
	c.mu.Unlock()
	if !wait {
		return nil
	}
	var timeout <-chan time.Time
	if c.headerTimeout > 0 {
		t := time.NewTimer(c.headerTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c.settledc:
		return nil
	case <-c.diedc:
		return nil // openableLocked says why
	case <-cs.ctx.Done():
		return cs.ctx.Err()
	case <-cs.req.Cancel:
		return errRequestCanceled
	case <-timeout:
		return ErrResponseHeaderTimeout
	}
}

// awaitResponse waits for the response head (ResponseHeaderTimeout runs
// from when the request is written).
func (c *clientConn) awaitResponse(cs *stream) (*http.Response, error) {
	if cs.ready == nil {
		// Nothing to wait for but the stream itself (the context's watch
		// fails it through abortLocked, which broadcasts cond too).
		c.mu.Lock()
		for !cs.readyDone {
			cs.cond.Wait()
		}
		c.mu.Unlock()
		return c.responseOf(cs)
	}
	var timeout <-chan time.Time
	var timer *time.Timer
	wrote := cs.wroteReq
	startTimer := func() {
		if c.headerTimeout > 0 {
			timer = time.NewTimer(c.headerTimeout)
			timeout = timer.C
		}
	}
	if wrote == nil {
		startTimer()
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-cs.ready:
			return c.responseOf(cs)
		case <-wrote:
			wrote = nil
			startTimer()
		case <-timeout:
			c.cancelStream(cs, ErrResponseHeaderTimeout)
		case <-cs.req.Cancel:
			c.cancelStream(cs, errRequestCanceled)
		}
	}
}

// responseOf returns what the stream's ready signal announced.
func (c *clientConn) responseOf(cs *stream) (*http.Response, error) {
	c.mu.Lock()
	resp := cs.resp
	var err error
	if resp == nil {
		err = roundTripErr(cs)
	}
	c.mu.Unlock()
	if err != nil {
		cs.closeBody()
		c.releaseSlotOf(cs)
		cs.stopWatch()
		return nil, err
	}
	resp.Request = cs.req
	if _, ok := resp.Body.(*responseBody); !ok {
		c.releaseSlotOf(cs)
		return resp, nil
	}
	if cs.head.gzip && asciiEqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
		resp.Body = &gzipBody{body: resp.Body}
	}
	return resp, nil
}

func asciiEqualFold(a, b string) bool { return strings.EqualFold(a, b) }
