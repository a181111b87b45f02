package h2conn

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
)

// A stream of the own connection: its state machine and the response body.
//
// A stream is open from its HEADERS until both sides have ended it
// (END_STREAM sent and received) or either side reset it; it counts
// against the peer's SETTINGS_MAX_CONCURRENT_STREAMS for exactly that
// long (it is in c.streams). The request's slot is separate: it is held
// from ReserveStream until RoundTrip fails, the response has no body, or
// the body ends or is closed. The received body is buffered up to the
// stream's receive window, which is only given back (WINDOW_UPDATE) as the
// caller reads, so a reader that stops stops the server.

// stream is one request on the own connection.
type stream struct {
	c     *clientConn
	req   *http.Request
	ctx   context.Context
	trace *httptrace.ClientTrace
	head  requestHead
	// body is the request body, nil for none. Read only by the body
	// writer; closed once (closeBody).
	body   io.ReadCloser
	isHead bool
	expect bool // Expect: 100-continue with a wait before the body
	// inline: the body goes out with the HEADERS (inline.go). Decided by
	// RoundTrip and openStream before the stream is shared, then
	// read-only.
	inline bool
	// ready is closed when readyDone becomes true; it exists only when
	// RoundTrip's wait has something else to select on (a request body,
	// ResponseHeaderTimeout, req.Cancel): otherwise RoundTrip waits on
	// cond, which readyDone's setters broadcast.
	ready    chan struct{}
	on100    chan struct{} // receives at a 100 Continue (expect only)
	wroteReq chan struct{} // closed when the request is written or abandoned

	// Set before the stream is shared, then read-only.
	id uint32

	// Guarded by c.mu.
	readyDone   bool           // ready is closed
	resp        *http.Response // the final response head
	err         error          // the stream's failure, set once
	npReason    Reason         // non-zero: err means the server did not process it
	gotHead     bool           // final response HEADERS received
	sawFirst    bool           // any response HEADERS received
	recvEnded   bool           // END_STREAM received
	sentEnd     bool           // END_STREAM sent, or the request side given up
	gone        bool           // removed from c.streams
	buf         []byte         // received body bytes not yet read: buf[off:]
	off         int
	bodyErr     error // what Read returns once buf is drained
	bodyClosed  bool  // the response body was closed by the caller
	cond        sync.Cond
	sendWindow  int32
	recvAvail   int32
	recvUnacked int32
	remain      int64       // declared response Content-Length left, -1 unknown
	trailer     http.Header // response trailers received
	bytes1xx    int64       // header bytes of 1xx responses so far
	stopBody    bool        // send no more of the request body
	bodyShut    bool        // the request body was closed
	slotHeld    bool        // the request's slot is not yet released
	resetAtEnd  bool        // the body was given up: reset once the peer ends
	// bodyBegun: the body writer passed its last stopBody check before
	// sending (sendBody) and may write DATA; until then a stopBody
	// stream sends nothing more, so the reader may reset it itself.
	bodyBegun bool
	stopCtx   func() bool // stops the context watch; nil for none
	// rbody is the response body handed to the caller (resp.Body), part
	// of the stream so that it costs no allocation of its own.
	rbody responseBody
}

// setReadyLocked marks the response head (or the failure) as there and
// wakes RoundTrip; c.mu held.
func (cs *stream) setReadyLocked() {
	if cs.readyDone {
		return
	}
	cs.readyDone = true
	if cs.ready != nil {
		close(cs.ready)
	}
	cs.cond.Broadcast()
}

// errClosedResponseBody is what a read of a closed response body returns
// (net/http's text).
// It is an error value (not the errorString itself) so that storing it in
// an error field does not allocate.
var errClosedResponseBody error = errorString("http2: response body closed")

// errorString is a comparable constant error.
type errorString string

func (e errorString) Error() string { return string(e) }

// abortLocked fails the stream with err (the first failure wins), wakes
// whoever waits on it and stops its request body; c.mu held. The response
// body still returns what was buffered before the error.
func (c *clientConn) abortLocked(cs *stream, err error, reason Reason) {
	if cs.err == nil {
		cs.err = err
		cs.npReason = reason
	}
	cs.setReadyLocked()
	if cs.bodyErr == nil {
		cs.bodyErr = err
	}
	cs.stopBody = true
	cs.cond.Broadcast()
	c.wake.Broadcast()
}

// forgetLocked removes the stream from the connection; c.mu held. Its
// buffered bytes stay readable. It reports the connection WINDOW_UPDATE
// now due (none: dropBufferLocked gives those) and whether a dead
// connection must be closed (closeIfDoneLocked).
func (c *clientConn) forgetLocked(cs *stream) (connInc uint32, closeNow bool) {
	if cs.gone {
		return 0, false
	}
	cs.gone = true
	delete(c.streams, cs.id)
	if c.busy == 0 && len(c.streams) == 0 {
		c.idleSince = c.now()
	}
	c.wake.Broadcast()
	return connInc, c.closeIfDoneLocked()
}

// dropBufferLocked discards the unread body bytes of a stream this side
// ended, returning them to the connection window; c.mu held. It returns
// the connection WINDOW_UPDATE increment now due.
func (c *clientConn) dropBufferLocked(cs *stream) uint32 {
	unread := len(cs.buf) - cs.off
	c.recycleBufLocked(cs)
	if unread <= 0 {
		return 0
	}
	return c.connConsumedLocked(int32(unread))
}

// afterForget does, outside c.mu, what forgetLocked said is due, and
// tells the pool a stream is free.
func (c *clientConn) afterForget(connInc uint32, closeNow bool) {
	if connInc > 0 {
		c.writeWindowUpdate(0, connInc)
	}
	if closeNow {
		c.nc.Close()
	}
	c.notifyFree()
}

// cancelStream fails the stream with err on this side: it is reset with
// CANCEL if it is still open, and its request body stops.
func (c *clientConn) cancelStream(cs *stream, err error) {
	c.mu.Lock()
	c.abortLocked(cs, err, 0)
	wasOpen := !cs.gone && cs.id != 0
	var connInc uint32
	var closeNow bool
	confirm := false
	if wasOpen {
		connInc, closeNow = c.forgetLocked(cs)
		connInc += c.dropBufferLocked(cs)
		c.stray += strayPerReset
		confirm = c.countResetLocked(cs)
	}
	c.mu.Unlock()
	cs.closeBody()
	if wasOpen {
		c.sendCancel(cs.id, confirm)
		c.afterForget(connInc, closeNow)
	}
}

// endActs is what ending a stream's receiving side left to do outside c.mu.
type endActs struct {
	connInc          uint32
	closeNow, forgot bool
	// reset: send RST_STREAM(CANCEL), the request side was given up; the
	// end of the response body is shown to the caller only after it.
	reset bool
}

// endRecvLocked records the peer's END_STREAM; c.mu held. The trailers
// become visible and the body's EOF follows the buffered bytes. A stream
// now closed both ways (or whose request body was given up) is forgotten.
//
// A stream whose request body was given up is reset with CANCEL, and its
// end (with its response head, if that came with the end) is published by
// afterEnd once the reset is written: a caller that reads the body to EOF,
// or gets a response without one, and then sends its next request on this
// connection finds the reset already ahead of that request on the wire.
// (net/http gets the same order from its response body's Close, which
// waits for the reset.) Given up means the writer said so (resetAtEnd) or
// the response refused the body before the writer began it (stopBody
// without bodyBegun: it never sends).
func (c *clientConn) endRecvLocked(cs *stream) endActs {
	cs.recvEnded = true
	var a endActs
	refused := !cs.sentEnd && cs.stopBody && !cs.bodyBegun
	if cs.sentEnd || cs.resetAtEnd || refused {
		a.connInc, a.closeNow = c.forgetLocked(cs)
		a.forgot, a.reset = true, cs.resetAtEnd || refused
	}
	if !a.reset {
		publishEndLocked(cs)
	}
	return a
}

// publishEndLocked lets the response body's reader see the end of the
// stream after the buffered bytes, and RoundTrip the response head if it
// came with the end; c.mu held.
func publishEndLocked(cs *stream) {
	cs.setReadyLocked()
	if cs.bodyErr == nil {
		if cs.remain > 0 {
			cs.bodyErr = io.ErrUnexpectedEOF
		} else {
			cs.bodyErr = io.EOF // the trailers reach resp.Trailer at the body's EOF
		}
	}
	cs.cond.Broadcast()
}

// afterEnd does what endRecvLocked left to do.
func (c *clientConn) afterEnd(cs *stream, a endActs) {
	if a.reset {
		c.writeReset(cs.id, 0x8) // CANCEL
		c.mu.Lock()
		publishEndLocked(cs)
		c.mu.Unlock()
	}
	if a.forgot {
		c.afterForget(a.connInc, a.closeNow)
	}
}

// releaseSlotOf gives back the request's slot, once.
func (c *clientConn) releaseSlotOf(cs *stream) {
	c.mu.Lock()
	held := cs.slotHeld
	cs.slotHeld = false
	gone := cs.gone
	c.mu.Unlock()
	if held {
		c.releaseSlot()
	}
	if gone {
		cs.stopWatch()
	}
}

// closeBody closes the request body once.
func (cs *stream) closeBody() {
	if cs.body == nil {
		return
	}
	c := cs.c
	c.mu.Lock()
	shut := cs.bodyShut
	cs.bodyShut = true
	c.mu.Unlock()
	if !shut {
		cs.body.Close()
	}
}

// responseBody is the body of a response on the own connection.
type responseBody struct {
	cs *stream
}

func (b *responseBody) Read(p []byte) (int, error) {
	cs := b.cs
	c := cs.c
	c.mu.Lock()
	for cs.off == len(cs.buf) && cs.bodyErr == nil {
		cs.cond.Wait()
	}
	if cs.off < len(cs.buf) {
		n := copy(p, cs.buf[cs.off:])
		cs.off += n
		if cs.off == len(cs.buf) {
			cs.buf, cs.off = cs.buf[:0], 0
		}
		connInc, streamInc := c.consumedLocked(cs, int32(n))
		var err error
		if cs.off == len(cs.buf) && cs.bodyErr == io.EOF {
			err = io.EOF
			copyTrailerLocked(cs)
			c.recycleBufLocked(cs) // the peer ended the stream: nothing more comes
		}
		c.mu.Unlock()
		if connInc > 0 || streamInc > 0 {
			c.writeWindowUpdates(cs.id, connInc, streamInc)
		}
		if err != nil {
			c.releaseSlotOf(cs)
		}
		return n, err
	}
	err := cs.bodyErr
	if err == io.EOF {
		copyTrailerLocked(cs)
		c.recycleBufLocked(cs)
	}
	c.mu.Unlock()
	c.releaseSlotOf(cs)
	return 0, err
}

// copyTrailerLocked puts the received trailers into resp.Trailer; c.mu
// held. It runs on the goroutine that reads the body, when a Read returns
// io.EOF, so the caller's map is written only by the caller's own Read
// (net/http's contract: resp.Trailer holds the values after EOF), never by
// the frame reader while the caller looks at it.
func copyTrailerLocked(cs *stream) {
	if len(cs.trailer) == 0 || cs.resp == nil {
		return
	}
	if cs.resp.Trailer == nil {
		cs.resp.Trailer = make(http.Header, len(cs.trailer))
	}
	for k, v := range cs.trailer {
		cs.resp.Trailer[k] = v
	}
}

// Close ends the stream (with RST_STREAM CANCEL if the server has not
// ended it, or the request body is still going out) and releases the
// slot. Later reads fail.
func (b *responseBody) Close() error {
	cs := b.cs
	c := cs.c
	c.mu.Lock()
	if cs.bodyClosed {
		c.mu.Unlock()
		return nil
	}
	cs.bodyClosed = true
	open := !cs.gone
	var connInc uint32
	var closeNow bool
	confirm := false
	if open {
		c.abortLocked(cs, errClosedResponseBody, 0)
		connInc, closeNow = c.forgetLocked(cs)
		c.stray += strayPerReset
		confirm = c.countResetLocked(cs)
	}
	connInc += c.dropBufferLocked(cs)
	cs.bodyErr = errClosedResponseBody
	c.mu.Unlock()
	if open {
		cs.closeBody()
		c.sendCancel(cs.id, confirm)
		c.afterForget(connInc, closeNow)
	} else if connInc > 0 {
		c.writeWindowUpdate(0, connInc)
	}
	c.releaseSlotOf(cs)
	return nil
}

// stopWatch stops the context watch of a stream that is done.
func (cs *stream) stopWatch() {
	if cs.stopCtx != nil {
		cs.stopCtx()
	}
}

// missingBody is the body of a response whose HEADERS ended the stream
// although they declared content: reading it fails as net/http's does.
type missingBody struct{}

func (missingBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
func (missingBody) Close() error             { return nil }
