package h2conn

import (
	"errors"

	"golang.org/x/net/http2"
)

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
	// left no room, or (legacy x/net) the connection filled up after the
	// reservation, with a stream just reset by a cancelled request (counted
	// until the server acknowledges the reset) or a server lowering its
	// limit. Nothing was written and the body was not read. The connection
	// is still usable: the request should take a stream that frees, or
	// another connection.
	ReasonStreamLimit
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
	}
	return "unknown"
}

// NotProcessedError is returned by RoundTrip when the server provably did not
// process the request, so that it is safe to send it again on another
// connection. Whether its body can be replayed is the caller's rule (no
// body, http.NoBody, GetBody, or BodyUnread).
type NotProcessedError struct {
	// Reason is why the request was not processed.
	Reason Reason
	// BodyUnread reports that not a byte of the request body was read, so
	// the same Body can be sent again even without GetBody.
	BodyUnread bool
	// Err is the error x/net returned (or this package's, for a request
	// refused before it reached x/net).
	Err error
}

func (e *NotProcessedError) Error() string {
	return "h2conn: request not processed (" + e.Reason.String() + "), safe to retry: " + e.Err.Error()
}

// Unwrap returns the x/net error.
func (e *NotProcessedError) Unwrap() error { return e.Err }

// IsRetryable reports whether err, from RoundTrip, says that the server did
// not process the request (a *NotProcessedError anywhere in the chain), so it
// may be sent again on another connection under the body replay rules.
func IsRetryable(err error) bool {
	var np *NotProcessedError
	return errors.As(err, &np)
}

// The x/net client (and net/http's own HTTP/2 client, which x/net wraps on
// Go 1.27 and later) reports these conditions with unexported sentinel errors
// of identical text in both packages; the text is the only thing they share.
// The tests pin each of them on both toolchains.
const (
	errTextUnusable       = "http2: client conn not usable"
	errTextGoAway         = "http2: Transport received Server's graceful shutdown GOAWAY"
	errTextNotEstablished = "http2: client conn could not be established"
)

// classify wraps a RoundTrip error in *NotProcessedError when the request
// was not processed, and returns every other error unchanged.
func classify(err error) error {
	if err == nil {
		return nil
	}
	switch err.Error() {
	case errTextUnusable:
		return &NotProcessedError{Reason: ReasonConnUnusable, BodyUnread: true, Err: err}
	case errTextGoAway:
		return &NotProcessedError{Reason: ReasonGoAway, Err: err}
	}
	// A StreamError from net/http's internal copy converts through its As
	// method, so this matches in both modes.
	var se http2.StreamError
	if errors.As(err, &se) && se.Code == http2.ErrCodeRefusedStream {
		return &NotProcessedError{Reason: ReasonRefusedStream, Err: err}
	}
	return err
}
