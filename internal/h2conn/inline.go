package h2conn

import (
	"fmt"
	"io"
	"sync"
)

// A small request body held in memory goes out with its HEADERS: one DATA
// frame with END_STREAM, written and flushed with them on the caller's
// goroutine, so the request costs one write and no body goroutine (net/http
// writes HEADERS and body apart, from a goroutine of its own). Only a body
// that can never wait qualifies: the transport marks it (ReplayBody's
// MarkInMemory: a bytes or strings reader holding exactly ContentLength
// bytes, with GetBody to send it again), it fits in one frame and in both
// send windows when the stream opens, and the request has no trailers and
// no "Expect: 100-continue". Any other body, or one the windows cannot take
// at once, is sent by writeBody (write.go) from a goroutine of its own.

// inlineCandidate reports whether cs's body may go out with its HEADERS,
// windows permitting (takeInlineWindowLocked).
func inlineCandidate(cs *stream) bool {
	rb, ok := cs.body.(*ReplayBody)
	if !ok || !rb.inMemory || cs.expect || len(cs.req.Trailer) > 0 {
		return false
	}
	n := cs.head.contentLength
	return n > 0 && n <= maxInlineBody
}

// takeInlineWindowLocked takes the whole body's length from both send
// windows if they have room for it; c.mu held, cs's send window set.
func (c *clientConn) takeInlineWindowLocked(cs *stream) bool {
	n := int32(cs.head.contentLength)
	if c.sendWindow < n || cs.sendWindow < n {
		return false
	}
	c.sendWindow -= n
	cs.sendWindow -= n
	return true
}

// inlineBuf holds an inline body and the byte that must find its EOF.
type inlineBuf = [maxInlineBody + 1]byte

// inlineBufPool holds inline body buffers between requests (apart from
// sendBufPool's, five times larger).
var inlineBufPool = sync.Pool{New: func() any { return new(inlineBuf) }}

// readInlineBody reads cs's in-memory body into a buffer from
// inlineBufPool (the caller puts it back once the frame is flushed). The
// read never waits; it fails only if the body no longer holds
// ContentLength bytes (changed by another goroutine since the transport
// looked).
func readInlineBody(cs *stream) (*inlineBuf, []byte, error) {
	bufp := inlineBufPool.Get().(*inlineBuf)
	n := int(cs.head.contentLength)
	// One byte more than declared must find EOF, as sendBody checks.
	m, err := io.ReadFull(cs.body, bufp[:n+1])
	if err == io.ErrUnexpectedEOF && m == n {
		return bufp, bufp[:n], nil
	}
	inlineBufPool.Put(bufp)
	if err == nil || err == io.ErrUnexpectedEOF || err == io.EOF {
		err = fmt.Errorf("http2: in-memory request body changed: %d bytes read for ContentLength %d", m, n)
	}
	return nil, nil, err
}

// dropUnsentLocked forgets a stream whose HEADERS were never written (its
// inline body could not be read), giving back the window it took; c.mu
// held. The caller does afterForget.
func (c *clientConn) dropUnsentLocked(cs *stream, err error) (connInc uint32, closeNow bool) {
	n := int32(cs.head.contentLength)
	c.sendWindow += n
	cs.sendWindow += n
	c.abortLocked(cs, err, 0)
	return c.forgetLocked(cs)
}
