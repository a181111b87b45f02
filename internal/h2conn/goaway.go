package h2conn

import (
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/net/http2"
)

// How streams and the own connection end: the peer's RST_STREAM and
// GOAWAY, and the errors requests get, with net/http's texts where callers
// compare them (errors.go lists the ones callers compare).

var (
	// errClientConnGotGoAway: the server's GOAWAY named an earlier last
	// stream, so it never processed this one.
	errClientConnGotGoAway = errors.New(errTextGoAway)
	// errClientConnUnusable: the connection could take no new stream.
	errClientConnUnusable = errors.New(errTextUnusable)
	// errClientConnNotEstablished: the connection ended before the
	// server's SETTINGS arrived.
	errClientConnNotEstablished = errors.New(errTextNotEstablished)
	// errClientConnLost: the connection failed under a request.
	errClientConnLost = errors.New("http2: client connection lost")
	// errClientConnClosed: the connection was closed idle or shut down.
	errClientConnClosed = errors.New("http2: client conn is closed")
	// errClientConnForceClosed: Close was called with requests in flight.
	errClientConnForceClosed = errors.New("http2: client connection force closed via ClientConn.Close")
	// errPingTimeout: the health check's PING went unanswered.
	errPingTimeout = errors.New("http2: client connection lost: PING timeout")
	// errFromPeer is the Cause of a StreamError made from the peer's
	// RST_STREAM.
	errFromPeer = errors.New(errTextFromPeer)
)

// peerReset fails cs for the peer's RST_STREAM with code; c.mu held.
// REFUSED_STREAM means not processed; a PROTOCOL_ERROR before the
// response head is retried where the toolchain's net/http retries it, and
// in any case the connection takes no new streams (as net/http).
func (c *clientConn) peerResetLocked(cs *stream, code http2.ErrCode) {
	err := http2.StreamError{StreamID: cs.id, Code: code, Cause: errFromPeer}
	var reason Reason
	switch {
	case code == http2.ErrCodeRefusedStream:
		reason = ReasonRefusedStream
	case code == http2.ErrCodeProtocol:
		c.setDeadLocked()
		if retriesProtocolReset && !cs.gotHead {
			reason = ReasonProtocolReset
		}
	}
	c.abortLocked(cs, err, reason)
}

// goAwayLocked records the peer's GOAWAY; c.mu held. Streams above its
// last stream ID were not processed and fail at once (retryable), except
// that a first stream answered with an error code fails for good, as
// net/http does: retrying on a new connection is unlikely to help. It
// returns the streams it removed.
func (c *clientConn) goAwayLocked(f *http2.GoAwayFrame) []*stream {
	c.goAway = true
	c.goAwayID = f.LastStreamID
	c.goAwayCode = f.ErrCode
	c.goAwayDebug = string(f.DebugData())
	c.setDeadLocked()
	var gone []*stream
	for id, cs := range c.streams {
		if id <= f.LastStreamID {
			continue
		}
		if id == 1 && f.ErrCode != http2.ErrCodeNo {
			c.abortLocked(cs, fmt.Errorf("http2: Transport received GOAWAY from server ErrCode:%v", f.ErrCode), 0)
		} else {
			c.abortLocked(cs, errClientConnGotGoAway, ReasonGoAway)
		}
		gone = append(gone, cs)
	}
	return gone
}

// readerErrLocked is what the streams in flight get when the reader
// stopped with err; c.mu held.
func (c *clientConn) readerErrLocked(err error) error {
	if c.closeErr != nil {
		return c.closeErr
	}
	var ne net.Error
	if c.goAway && (err == io.EOF || errors.As(err, &ne)) {
		return http2.GoAwayError{LastStreamID: c.goAwayID, ErrCode: c.goAwayCode, DebugData: c.goAwayDebug}
	}
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// roundTripErr is the error RoundTrip returns for a failed stream: a
// *NotProcessedError when the server did not process it.
func roundTripErr(cs *stream) error {
	if cs.npReason != 0 {
		// The stream went out: whether its body was read is the toolchain
		// net/http's question, and it says "written" (it closes the body
		// on any error after the request started), so only a request
		// that never got a stream (openStream) reports it unread.
		return &NotProcessedError{Reason: cs.npReason, Err: cs.err}
	}
	return cs.err
}
