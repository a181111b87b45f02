package h2conn

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// Writing frames on the own connection. Every write holds c.wmu from the
// first byte of a frame (or of a HEADERS frame's CONTINUATIONs) to the
// flush that puts it on the socket, so frames never interleave; the first
// write error sticks (c.werr) and fails every later write at once.

// errStopBody ends a request body's upload that the response made moot (a
// status above 299, as net/http: the server does not want the body).
var errStopBody = errors.New("http2: aborting request body write")

// errReqBodyTooLong is net/http's error for a body longer than its
// ContentLength.
var errReqBodyTooLong = errors.New("http2: request body larger than specified content length")

// flushLocked flushes the buffered frames; c.wmu held.
func (c *clientConn) flushLocked() error {
	if c.werr != nil {
		return c.werr
	}
	if err := c.bw.Flush(); err != nil {
		c.werr = err
		return err
	}
	return nil
}

// writeReset sends RST_STREAM.
func (c *clientConn) writeReset(id uint32, code http2.ErrCode) {
	c.wmu.Lock()
	if c.werr == nil {
		c.fr.WriteRSTStream(id, code)
		c.flushLocked()
	}
	c.wmu.Unlock()
}

// writeWindowUpdate sends one WINDOW_UPDATE (id 0: the connection).
func (c *clientConn) writeWindowUpdate(id, inc uint32) {
	if id == 0 {
		c.writeWindowUpdates(0, inc, 0)
		return
	}
	c.writeWindowUpdates(id, 0, inc)
}

// writeWindowUpdates sends the connection's and stream id's WINDOW_UPDATEs
// that are due (a zero increment sends nothing), with one flush.
func (c *clientConn) writeWindowUpdates(id, connInc, streamInc uint32) {
	c.wmu.Lock()
	if c.werr == nil {
		if connInc > 0 {
			c.fr.WriteWindowUpdate(0, connInc)
		}
		if streamInc > 0 {
			c.fr.WriteWindowUpdate(id, streamInc)
		}
		c.flushLocked()
	}
	c.wmu.Unlock()
}

// writeHeaderBlockLocked writes the encoded header block in c.hbuf as a
// HEADERS frame and as many CONTINUATIONs as the peer's frame size needs;
// c.wmu held.
func (c *clientConn) writeHeaderBlockLocked(id uint32, endStream bool, maxFrame uint32) error {
	block := c.hbuf.Bytes()
	first := true
	for first || len(block) > 0 {
		chunk := block
		if uint32(len(chunk)) > maxFrame {
			chunk = chunk[:maxFrame]
		}
		block = block[len(chunk):]
		var err error
		if first {
			err = c.fr.WriteHeaders(http2.HeadersFrameParam{
				StreamID: id, BlockFragment: chunk, EndStream: endStream, EndHeaders: len(block) == 0,
			})
			first = false
		} else {
			err = c.fr.WriteContinuation(id, len(block) == 0, chunk)
		}
		if err != nil {
			c.werr = err
			return err
		}
	}
	return nil
}

// encodeRequestLocked encodes cs's request header list into c.hbuf,
// firing WroteHeaderField for each field; c.wmu held.
func (c *clientConn) encodeRequestLocked(cs *stream) {
	c.hbuf.Reset()
	var trace func(string, []string)
	if cs.trace != nil {
		trace = cs.trace.WroteHeaderField
	}
	eachRequestField(cs.req, &cs.head, func(name, value string) {
		c.henc.writeField(name, value)
		if trace != nil {
			trace(name, []string{value})
		}
	})
}

// writeBody sends the request body (after a 100 Continue wait if asked),
// then its trailers or END_STREAM. It runs on its own goroutine; it fails
// the stream if the body or the connection fails.
func (c *clientConn) writeBody(cs *stream) {
	err := c.sendBody(cs)
	cs.closeBody()
	if trace := cs.trace; trace != nil && trace.WroteRequest != nil {
		werr := err
		if werr == errStopBody {
			werr = nil
		}
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: werr})
	}
	close(cs.wroteReq)
	if err == nil {
		return
	}
	if err == errStopBody {
		// The response said the body is not wanted: the stream is reset
		// once the server has ended it, or now if it has.
		c.mu.Lock()
		var a endActs
		if cs.err == nil && !cs.gone {
			if cs.recvEnded {
				a.connInc, a.closeNow = c.forgetLocked(cs)
				a.forgot, a.reset = true, true
			} else {
				cs.resetAtEnd = true
			}
		}
		c.mu.Unlock()
		c.afterEnd(cs, a)
		return
	}
	c.cancelStream(cs, err)
}

// sendBody is writeBody's work.
func (c *clientConn) sendBody(cs *stream) error {
	if cs.expect {
		if err := c.awaitContinue(cs); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if cs.stopBody {
		err := cs.err
		c.mu.Unlock()
		if err == nil {
			err = errStopBody
		}
		return err
	}
	cs.bodyBegun = true
	peerMax := c.peerMaxFrame
	c.mu.Unlock()

	bufp := sendBufPool.Get().(*[sendBufLen]byte)
	defer sendBufPool.Put(bufp)
	buf := bufp[:bodyReadLen(cs.head.contentLength, peerMax)]
	trailers := len(cs.req.Trailer) > 0
	remain := cs.head.contentLength // -1: unknown
	for {
		n, rerr := cs.body.Read(buf)
		if remain >= 0 {
			if int64(n) > remain {
				return errReqBodyTooLong
			}
			remain -= int64(n)
		}
		eof := rerr == io.EOF
		if rerr != nil && !eof {
			return rerr
		}
		if !eof && remain == 0 {
			// All declared bytes are in: one more read must say EOF.
			one := make([]byte, 1)
			if n < len(buf) {
				one = buf[n : n+1] // spare room: no allocation
			}
			m, err := cs.body.Read(one)
			if m > 0 {
				return errReqBodyTooLong
			}
			if err != nil && err != io.EOF {
				return err
			}
			eof = err == io.EOF
		}
		if eof && remain > 0 {
			return fmt.Errorf("http: ContentLength=%d with Body length %d", cs.head.contentLength, cs.head.contentLength-remain)
		}
		end := eof && !trailers
		if n > 0 || end {
			if err := c.writeData(cs, buf[:n], end); err != nil {
				return err
			}
		}
		if eof {
			break
		}
	}
	if trailers {
		return c.writeTrailers(cs)
	}
	return nil
}

// sendBufPool holds request body buffers between uploads.
var sendBufPool = sync.Pool{New: func() any { return new([sendBufLen]byte) }}

// writeData sends p as DATA frames as the send windows allow; end sets
// END_STREAM on the last.
func (c *clientConn) writeData(cs *stream, p []byte, end bool) error {
	for {
		n, err := c.takeSendWindow(cs, len(p))
		if err != nil {
			return err
		}
		chunk := p[:n]
		p = p[n:]
		last := end && len(p) == 0
		c.wmu.Lock()
		if last {
			c.endingLocked(cs)
		}
		if c.werr == nil {
			if err := c.fr.WriteData(cs.id, last, chunk); err != nil {
				c.werr = err
			}
		}
		err = c.flushLocked()
		c.wmu.Unlock()
		if err != nil {
			return err
		}
		if last {
			c.sentEndOf(cs)
		}
		if len(p) == 0 {
			return nil
		}
	}
}

// writeTrailers sends the request's trailers with END_STREAM.
func (c *clientConn) writeTrailers(cs *stream) error {
	c.mu.Lock()
	if cs.err != nil {
		err := cs.err
		c.mu.Unlock()
		return err
	}
	maxFrame := c.peerMaxFrame
	c.mu.Unlock()
	c.wmu.Lock()
	c.endingLocked(cs)
	c.hbuf.Reset()
	for k, vv := range cs.req.Trailer {
		lk := lowerKey(k)
		for _, v := range vv {
			c.henc.writeField(lk, v)
		}
	}
	err := c.writeHeaderBlockLocked(cs.id, true, maxFrame)
	if err == nil {
		err = c.flushLocked()
	}
	c.wmu.Unlock()
	if err == nil {
		c.sentEndOf(cs)
	}
	return err
}

// endingLocked records, with c.wmu held and before the frame carrying
// cs's END_STREAM is written, that the request side ends. The server may
// answer that frame, and the reader end the stream, before the write
// returns here: the stream must then already count as closed both ways,
// or a Close of the response body would reset it with CANCEL where
// net/http, which resets only a stream whose END_STREAM it did not send,
// does not. sentEndOf forgets the stream after the write if the reader
// did not.
func (c *clientConn) endingLocked(cs *stream) {
	c.mu.Lock()
	cs.sentEnd = true
	c.mu.Unlock()
}

// sentEndOf forgets cs, once END_STREAM went out, if the server has
// ended it too and the reader did not forget it.
func (c *clientConn) sentEndOf(cs *stream) {
	c.mu.Lock()
	var connInc uint32
	var closeNow, forgot bool
	if cs.recvEnded && !cs.gone {
		connInc, closeNow = c.forgetLocked(cs)
		forgot = true
	}
	c.mu.Unlock()
	if forgot {
		c.afterForget(connInc, closeNow)
	}
}

// awaitContinue holds the body of an "Expect: 100-continue" request until
// the server's 100 Continue, a final response that wants the body, or
// ExpectContinueTimeout.
func (c *clientConn) awaitContinue(cs *stream) error {
	if cs.trace != nil && cs.trace.Wait100Continue != nil {
		cs.trace.Wait100Continue()
	}
	t := time.NewTimer(c.continueTimeout)
	defer t.Stop()
	select {
	case <-cs.on100:
	case <-t.C:
	case <-cs.ready:
		// A final response (or a failure): the body goes out only to a
		// status that may still want it (checked by sendBody: stopBody).
	}
	return nil
}

// lowerKey is a header key as HTTP/2 sends it.
func lowerKey(k string) string {
	if lk, ok := asciiLower(k); ok {
		return lk
	}
	return strings.ToLower(k)
}

// requestWrittenAtOnce reports whether a request has no body to send, so
// that its HEADERS carry END_STREAM.
func requestWrittenAtOnce(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody
}
