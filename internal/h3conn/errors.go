package h3conn

import (
	"errors"

	"github.com/quic-go/quic-go/http3"
)

var (
	// ErrDialerClosed is returned by Dial after Close, and by a Dial that
	// Close interrupted.
	ErrDialerClosed = errors.New("h3conn: dialer closed")
	// ErrConnUnusable is wrapped in a *RetryableError when a request meets a
	// connection that can take no new stream (closed, GOAWAY, no capacity).
	ErrConnUnusable = errors.New("h3conn: connection cannot take a new request")
	// ErrHeadStartExpired is what a request that stopped waiting for a
	// QUIC dial when its head start ended (Flight.Wait) goes on with: TCP;
	// the dial goes on in the background.
	ErrHeadStartExpired = errors.New("h3conn: QUIC head start expired")
	// ErrPathDead is wrapped by the errors of requests that were on a Conn
	// when it judged its network path dead and closed itself: the server
	// may or may not have received them, and any response was cut.
	ErrPathDead = errors.New("h3conn: connection closed: its network path stopped acknowledging packets")
)

// RetryableError is a request failure that the server did not process: the
// request may go out again, on another connection or over TCP, under the
// caller's replay rules. Err keeps the cause (errors.Is/As see through).
type RetryableError struct {
	// Err is the underlying failure.
	Err error
	// Unsent reports that nothing of the request left the client: its body
	// was never read, so the same request can be sent again unchanged. When
	// false the server refused the request (H3_REQUEST_REJECTED) after some
	// of it may have been sent; a body must be rewound (GetBody) first.
	Unsent bool
}

// Error implements error.
func (e *RetryableError) Error() string {
	if e.Unsent {
		return "h3conn: request not sent: " + e.Err.Error()
	}
	return "h3conn: request rejected unprocessed: " + e.Err.Error()
}

// Unwrap returns Err.
func (e *RetryableError) Unwrap() error { return e.Err }

// IsRetryable reports whether err (or an error it wraps) is a
// *RetryableError: the request was not processed by the server.
func IsRetryable(err error) bool {
	_, ok := errors.AsType[*RetryableError](err)
	return ok
}

// isRequestRejected reports an H3_REQUEST_REJECTED stream or connection
// error: RFC 9114 section 8.1 guarantees the request was not processed.
func isRequestRejected(err error) bool {
	e, ok := errors.AsType[*http3.Error](err)
	return ok && e.ErrorCode == http3.ErrCodeRequestRejected
}
