package h2conn

import (
	"errors"
	"net/http"
	"net/textproto"
	"time"

	"golang.org/x/net/http2"
)

// The own connection's frame reader: one goroutine per connection reads
// every frame and dispatches it by stream ID. It never blocks on anything
// but the socket and the write lock (for the acks and WINDOW_UPDATEs it
// owes and the resets it sends): answers to a SETTINGS or PING flood are
// written one by one as the frames are read, so nothing queues. Frames for
// streams that are gone (reset by this side, say) are dropped, up to an
// allowance that grows with the resets this side sends; beyond it the
// peer is given up (ENHANCE_YOUR_CALM).

// max1xxBytes is how many header bytes of 1xx responses a request accepts
// when nobody looks at them (Got1xxResponse unset): the response limit.
func (c *clientConn) max1xxBytes() int64 { return int64(c.maxHeaderList) }

func (c *clientConn) readLoop() {
	defer close(c.readerDone)
	err := c.readFrames()
	c.readerStopped(err)
}

// readFrames reads until the connection fails; a connection error of the
// peer's making is answered with GOAWAY first.
func (c *clientConn) readFrames() error {
	for {
		f, err := c.readFrame()
		if err == nil {
			if c.sendPingTimeout > 0 {
				c.lastRead.Store(time.Now().UnixNano())
			}
			err = c.dispatch(f)
		} else if se, ok := err.(http2.StreamError); ok {
			// A malformed header block on one stream.
			c.streamError(se)
			continue
		}
		if err == nil {
			continue
		}
		if ce, ok := err.(http2.ConnectionError); ok {
			c.countErr("conn_" + http2.ErrCode(ce).String())
			c.wmu.Lock()
			c.fr.WriteGoAway(0, http2.ErrCode(ce), nil)
			c.flushLocked()
			c.wmu.Unlock()
		}
		return err
	}
}

func (c *clientConn) countErr(token string) {
	if c.countError != nil {
		c.countError(token)
	}
}

func (c *clientConn) dispatch(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		return c.applySettings(f)
	case *http2.PingFrame:
		return c.onPing(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f)
	case *http2.GoAwayFrame:
		c.mu.Lock()
		gone := c.goAwayLocked(f)
		acts := c.forgetAllLocked(gone)
		c.mu.Unlock()
		acts.do(c)
		c.notifyFree()
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil // PRIORITY, unknown extension frames
}

// forgetActs is what forgetting streams left to do outside c.mu.
type forgetActs struct {
	connInc  uint32
	closeNow bool
	n        int
}

func (c *clientConn) forgetAllLocked(gone []*stream) forgetActs {
	var a forgetActs
	for _, cs := range gone {
		inc, cl := c.forgetLocked(cs)
		a.connInc += inc
		a.closeNow = a.closeNow || cl
		a.n++
	}
	return a
}

func (a forgetActs) do(c *clientConn) {
	if a.connInc > 0 {
		c.writeWindowUpdate(0, a.connInc)
	}
	if a.closeNow {
		c.nc.Close()
	}
	for range a.n {
		c.notifyFree()
	}
}

// streamLocked finds the stream a frame is for; c.mu held. A frame for a
// stream that is gone (or, as net/http has it, for one the peer made up)
// is dropped (nil, nil) within the stray allowance; dataFrame: DATA on a
// stream this side has not opened yet is a connection error (RFC 9113
// section 5.1), as in net/http.
func (c *clientConn) streamLocked(id uint32, dataFrame bool) (*stream, error) {
	if cs := c.streams[id]; cs != nil {
		return cs, nil
	}
	if dataFrame && id >= c.nextID {
		return nil, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.stray--
	if c.stray < 0 {
		return nil, http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil, nil
}

// streamError ends one stream for a malformed frame of its own: it is
// reset with the error's code.
func (c *clientConn) streamError(se http2.StreamError) {
	c.mu.Lock()
	cs := c.streams[se.StreamID]
	c.mu.Unlock()
	if cs != nil {
		c.resetStream(cs, se, se.Code)
	}
}

// resetStream fails cs with err and resets it with code.
func (c *clientConn) resetStream(cs *stream, err error, code http2.ErrCode) {
	c.mu.Lock()
	c.abortLocked(cs, err, 0)
	open := !cs.gone
	var connInc uint32
	var closeNow bool
	if open {
		connInc, closeNow = c.forgetLocked(cs)
		connInc += c.dropBufferLocked(cs)
		c.stray += strayPerReset
	}
	c.mu.Unlock()
	cs.closeBody()
	if open {
		c.writeReset(cs.id, code)
		c.afterForget(connInc, closeNow)
	}
}

func (c *clientConn) onHeaders(f *http2.MetaHeadersFrame) error {
	c.mu.Lock()
	cs, err := c.streamLocked(f.StreamID, false)
	if cs == nil {
		c.mu.Unlock()
		return err
	}
	if cs.recvEnded {
		c.mu.Unlock()
		c.resetStream(cs, http2.StreamError{StreamID: cs.id, Code: http2.ErrCodeStreamClosed}, http2.ErrCodeStreamClosed)
		return nil
	}
	first := !cs.sawFirst
	cs.sawFirst = true
	gotHead := cs.gotHead
	c.mu.Unlock()
	if first && cs.trace != nil && cs.trace.GotFirstResponseByte != nil {
		cs.trace.GotFirstResponseByte()
	}
	if gotHead {
		t, err := c.trailerHeader(f)
		if err != nil {
			c.resetStream(cs, http2.StreamError{StreamID: cs.id, Code: http2.ErrCodeProtocol, Cause: err}, http2.ErrCodeProtocol)
			return nil
		}
		c.mu.Lock()
		cs.trailer = t
		a := c.endRecvLocked(cs)
		c.mu.Unlock()
		c.afterEnd(cs, a)
		return nil
	}
	if f.Truncated {
		c.resetStream(cs, errResponseHeaderListSize, http2.ErrCodeProtocol)
		return nil
	}
	resp, err := c.responseHead(f)
	if err != nil {
		c.resetStream(cs, http2.StreamError{StreamID: cs.id, Code: http2.ErrCodeProtocol, Cause: err}, http2.ErrCodeProtocol)
		return nil
	}
	if resp.StatusCode < 200 {
		return c.on1xx(cs, f, resp)
	}
	c.finishResponse(cs, resp, f.StreamEnded())
	return nil
}

// errResponseHeaderListSize: the response head exceeded the limit this
// side announced (MaxResponseHeaderBytes).
var errResponseHeaderListSize = errors.New("http2: response header list larger than advertised limit")

// on1xx handles an informational response: Got1xxResponse (whose error
// fails the request), 100 Continue for a waiting body, and a bound on the
// 1xx header bytes nobody looks at.
func (c *clientConn) on1xx(cs *stream, f *http2.MetaHeadersFrame, resp *http.Response) error {
	fail := func(err error) error {
		c.resetStream(cs, err, http2.ErrCodeProtocol)
		return nil
	}
	if f.StreamEnded() {
		return fail(errors.New("1xx informational response with END_STREAM flag"))
	}
	if resp.StatusCode == 101 {
		return fail(errors.New("http2: server sent 101 Switching Protocols"))
	}
	var got1xx func(int, textproto.MIMEHeader) error
	if cs.trace != nil {
		got1xx = cs.trace.Got1xxResponse
	}
	if got1xx != nil {
		if err := got1xx(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
			c.cancelStream(cs, err)
			return nil
		}
	} else {
		var size int64
		for _, hf := range f.Fields {
			size += int64(hf.Size())
		}
		c.mu.Lock()
		cs.bytes1xx += size
		over := cs.bytes1xx > c.max1xxBytes()
		c.mu.Unlock()
		if over {
			return fail(errors.New("header list too large"))
		}
	}
	if resp.StatusCode == 100 {
		if cs.trace != nil && cs.trace.Got100Continue != nil {
			cs.trace.Got100Continue()
		}
		if cs.on100 != nil {
			select {
			case cs.on100 <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// finishResponse hands the final response head to RoundTrip.
func (c *clientConn) finishResponse(cs *stream, resp *http.Response, ended bool) {
	resp.TLS = c.tls
	switch {
	case cs.isHead:
		resp.Body = http.NoBody
	case ended:
		if resp.ContentLength > 0 {
			resp.Body = missingBody{}
		} else {
			if resp.ContentLength < 0 {
				resp.ContentLength = 0
			}
			resp.Body = http.NoBody
		}
	default:
		cs.rbody.cs = cs
		resp.Body = &cs.rbody
	}
	c.mu.Lock()
	// A server that answers without ever sending SETTINGS (net/http takes
	// its answers) is held to the defaults from now on.
	wakes := 0
	if c.settleLocked() {
		wakes = min(c.roomCountLocked(), maxWakes)
	}
	cs.gotHead = true
	cs.resp = resp
	cs.remain = resp.ContentLength
	if cs.isHead {
		cs.remain = -1
	}
	if resp.StatusCode > 299 {
		cs.stopBody = true // the server does not want the rest of the body
		c.wake.Broadcast()
	}
	var a endActs
	if ended {
		// Shows the response with the stream's end, after the reset if
		// the stream is to be reset (endRecvLocked).
		a = c.endRecvLocked(cs)
	} else {
		cs.setReadyLocked()
	}
	c.mu.Unlock()
	c.afterEnd(cs, a)
	for range wakes {
		c.notifyFree()
	}
}

func (c *clientConn) onData(f *http2.DataFrame) error {
	n := int32(f.Length)
	data := f.Data()
	c.mu.Lock()
	if n > c.recvAvail {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvAvail -= n
	cs, err := c.streamLocked(f.StreamID, true)
	if cs == nil {
		// Gone: the bytes are the connection's again at once.
		var inc uint32
		if n > 0 {
			inc = c.connConsumedLocked(n)
		}
		c.mu.Unlock()
		if inc > 0 {
			c.writeWindowUpdate(0, inc)
		}
		return err
	}
	if n > cs.recvAvail {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	cs.recvAvail -= n
	if !cs.gotHead || cs.recvEnded || cs.bodyClosed {
		c.mu.Unlock()
		c.resetStream(cs, http2.StreamError{StreamID: cs.id, Code: http2.ErrCodeProtocol, Cause: errDataBeforeHead}, http2.ErrCodeProtocol)
		return nil
	}
	var connInc, streamInc uint32
	if pad := n - int32(len(data)); pad > 0 {
		connInc, streamInc = c.consumedLocked(cs, pad)
	}
	if cs.remain >= 0 {
		if int64(len(data)) > cs.remain {
			c.mu.Unlock()
			c.resetStream(cs, errTooMuchData, http2.ErrCodeProtocol)
			return nil
		}
		cs.remain -= int64(len(data))
	}
	if len(data) > 0 {
		c.appendBodyLocked(cs, data)
		cs.cond.Broadcast()
	}
	var a endActs
	if f.StreamEnded() {
		a = c.endRecvLocked(cs)
	}
	c.mu.Unlock()
	if connInc > 0 || streamInc > 0 {
		c.writeWindowUpdates(cs.id, connInc, streamInc)
	}
	c.afterEnd(cs, a)
	return nil
}

var (
	errDataBeforeHead = errors.New("http2: DATA outside a response body")
	// errTooMuchData is net/http's text for a body longer than its
	// Content-Length.
	errTooMuchData = errors.New("net/http: server replied with more than declared Content-Length; truncated")
)

func (c *clientConn) onPing(f *http2.PingFrame) error {
	if f.IsAck() {
		c.mu.Lock()
		if ch, ok := c.pings[f.Data]; ok {
			delete(c.pings, f.Data)
			close(ch)
		}
		c.mu.Unlock()
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.fr.WritePing(true, f.Data); err != nil {
		return err
	}
	return c.flushLocked()
}

func (c *clientConn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	if f.StreamID == 0 {
		if int64(c.sendWindow)+int64(f.Increment) > maxWindow {
			c.mu.Unlock()
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.sendWindow += int32(f.Increment)
		c.wake.Broadcast()
		c.mu.Unlock()
		return nil
	}
	cs, err := c.streamLocked(f.StreamID, false)
	if cs == nil {
		c.mu.Unlock()
		return err
	}
	if int64(cs.sendWindow)+int64(f.Increment) > maxWindow {
		c.mu.Unlock()
		c.resetStream(cs, http2.StreamError{StreamID: cs.id, Code: http2.ErrCodeFlowControl}, http2.ErrCodeFlowControl)
		return nil
	}
	cs.sendWindow += int32(f.Increment)
	c.wake.Broadcast()
	c.mu.Unlock()
	return nil
}

func (c *clientConn) onReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	cs, err := c.streamLocked(f.StreamID, false)
	if cs == nil {
		c.mu.Unlock()
		return err
	}
	c.peerResetLocked(cs, f.ErrCode)
	connInc, closeNow := c.forgetLocked(cs)
	c.mu.Unlock()
	cs.closeBody()
	c.afterForget(connInc, closeNow)
	return nil
}

// readerStopped fails everything in flight once the reader ends: the
// connection is dead and closed.
func (c *clientConn) readerStopped(err error) {
	c.settleTimer.Stop()
	c.mu.Lock()
	c.readErr = err
	c.setDeadLocked()
	serr := c.readerErrLocked(err)
	var gone []*stream
	for _, cs := range c.streams {
		if !cs.recvEnded {
			c.abortLocked(cs, serr, 0)
		} else {
			cs.stopBody = true
		}
		gone = append(gone, cs)
	}
	for _, cs := range gone {
		cs.gone = true
		delete(c.streams, cs.id)
	}
	if c.busy == 0 {
		c.idleSince = c.now()
	}
	wasClosed := c.closed
	c.closed = true
	c.wake.Broadcast()
	c.mu.Unlock()
	if !wasClosed {
		c.nc.Close()
	}
	for _, cs := range gone {
		cs.closeBody()
	}
	c.notifyFree()
}
