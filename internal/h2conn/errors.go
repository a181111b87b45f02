package h2conn

import "errors"

// Reason says why a request was not processed by the server.
type Reason int

const (
	// ReasonGoAway: the server sent GOAWAY naming a last stream before this
	// request's stream, so it never processed it.
	ReasonGoAway Reason = iota + 1
	// ReasonRefusedStream: the server reset the stream with REFUSED_STREAM
	// (RFC 9113 section 8.7: not processed).
	ReasonRefusedStream
	// ReasonConnUnusable: the connection had become unusable (GOAWAY,
	// closed, broken) before the request was sent; nothing of it was written
	// and its body was not read.
	ReasonConnUnusable
	// ReasonStreamLimit: the connection was at its concurrent-stream limit
	// when the request was to go out, although its slot had been granted:
	// the slot was granted before the server's SETTINGS arrived and they
	// left no room, or the connection filled up after the reservation, with
	// a stream just reset by a cancelled request (counted until the server
	// acknowledges the reset) or a server lowering its limit. Nothing was written and the body was not read. The connection
	// is still usable: the request should wait for a stream that frees, or
	// take another connection (which is what net/http 1.26 does, giving
	// the full connection's MaxConnsPerHost slot back; it does not wait).
	ReasonStreamLimit
	// ReasonProtocolReset: the server reset the stream with PROTOCOL_ERROR
	// before the response headers. The server may have processed the
	// request: this reason is given only where the toolchain's net/http
	// sends such a request again (Go 1.26, golang/go#47635; see
	// protocolreset_go126.go), so that ferry does as net/http does. The
	// body may have been read.
	ReasonProtocolReset
)

func (r Reason) String() string {
	switch r {
	case ReasonGoAway:
		return "GOAWAY"
	case ReasonRefusedStream:
		return "REFUSED_STREAM"
	case ReasonConnUnusable:
		return "connection unusable"
	case ReasonStreamLimit:
		return "stream limit"
	case ReasonProtocolReset:
		return "PROTOCOL_ERROR reset"
	}
	return "unknown"
}

// NotProcessedError is returned by RoundTrip when the request may be sent
// again on another connection: the server provably did not process it, or
// (ReasonProtocolReset, Go 1.26 builds only) the toolchain's net/http would
// send it again. ReasonProtocolReset is the exception to the name: the
// server may have processed that request, so the error says only that
// net/http would retry it, not that retrying is safe for a request that is
// not idempotent. Whether its body can be replayed is the caller's rule (no
// body, http.NoBody, GetBody, or BodyUnread).
type NotProcessedError struct {
	// Reason is why the request was not processed (or, for
	// ReasonProtocolReset, why it may be sent again although the server
	// may have processed it).
	Reason Reason
	// BodyUnread reports that not a byte of the request body was read, so
	// the same Body can be sent again even without GetBody.
	BodyUnread bool
	// Err is the underlying error, with net/http's text where it has one.
	Err error
}

func (e *NotProcessedError) Error() string {
	if e.Reason == ReasonProtocolReset {
		return "h2conn: stream reset by the server with PROTOCOL_ERROR, retryable as net/http retries it: " + e.Err.Error()
	}
	return "h2conn: request not processed (" + e.Reason.String() + "), safe to retry: " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *NotProcessedError) Unwrap() error { return e.Err }

// IsRetryable reports whether err, from RoundTrip, says that the request may
// be sent again on another connection under the body replay rules (a
// *NotProcessedError anywhere in the chain): the server did not process it,
// or, for ReasonProtocolReset, net/http would send it again.
func IsRetryable(err error) bool {
	var np *NotProcessedError
	return errors.As(err, &np)
}

// net/http's HTTP/2 client reports these conditions with
// unexported sentinel errors; callers that test them can only compare the
// text, so the own connection's errors carry the same (goaway.go).
const (
	errTextUnusable       = "http2: client conn not usable"
	errTextGoAway         = "http2: Transport received Server's graceful shutdown GOAWAY"
	errTextNotEstablished = "http2: client conn could not be established"
	// errTextFromPeer is the Cause of a StreamError made from an RST_STREAM
	// the server sent.
	errTextFromPeer = "received from peer"
)

// ErrResponseHeaderTimeout is returned when Config.ResponseHeaderTimeout
// passes while a request waits for the server's SETTINGS before it can be
// sent (a provisional slot, slots.go). A net.Error whose Timeout is
// true, with the text of the error net/http's HTTP/2 client gives
// when the same timeout passes after the request was written: net/http
// sends such a request at once and times it out so; ferry holds it until
// the server's stream limit is known and must not hold it longer.
var ErrResponseHeaderTimeout error = &timeoutError{"http2: timeout awaiting response headers"}

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// errStreamLimit is the error inside the *NotProcessedError for a
// provisional slot that found the connection at the server's limit.
var errStreamLimit = errors.New("h2conn: connection is at the server's concurrent-stream limit")

// errRequestCanceled is returned when Request.Cancel fires while a request
// waits for the server's SETTINGS (net/http's text).
var errRequestCanceled = errors.New("net/http: request canceled")
