package h1conn

import (
	"context"
	"errors"
	"net/http/httptrace"
)

// httpTimeoutError is a net.Error whose Timeout() is true and which matches
// context.DeadlineExceeded under errors.Is, like net/http's timeoutError.
type httpTimeoutError struct{ msg string }

func (e *httpTimeoutError) Error() string   { return e.msg }
func (e *httpTimeoutError) Timeout() bool   { return true }
func (e *httpTimeoutError) Temporary() bool { return true }
func (e *httpTimeoutError) Is(err error) bool {
	return err == context.DeadlineExceeded
}

// ErrRequestCanceled is returned for Request.Cancel and CancelRequest, as
// net/http does.
var ErrRequestCanceled = errors.New("net/http: request canceled")

// ErrHeaderTimeout is ResponseHeaderTimeout's error.
var ErrHeaderTimeout error = &httpTimeoutError{"net/http: timeout awaiting response headers"}

// readFromServerError is a failure to read the first byte of a response:
// on a reused connection it usually means the server closed it while idle.
type readFromServerError struct{ err error }

// errServerClosedIdle is net/http's error for a connection the server
// closed (or answered 408 on) while it was idle.
var errServerClosedIdle = errors.New("http: server closed idle connection")

func (e readFromServerError) Error() string {
	return "net/http: Transport failed to read from server: " + e.err.Error()
}
func (e readFromServerError) Unwrap() error { return e.err }

// nothingWrittenError is a failure before any byte of the request reached
// the connection; such a request can be retried on another connection.
type nothingWrittenError struct{ error }

func (e nothingWrittenError) Unwrap() error { return e.error }

// connBrokenError is a write failure on the connection.
type connBrokenError struct{ err error }

func (e *connBrokenError) Error() string {
	return "net/http: HTTP/1.x transport connection broken: " + e.err.Error()
}
func (e *connBrokenError) Unwrap() error { return e.err }

// writeFailure wraps a failed request write: the caller's body error as
// is, a connection error as broken.
func writeFailure(err error) error {
	if _, ok := err.(requestBodyReadError); ok {
		return err
	}
	return &connBrokenError{err}
}

func httptraceWroteRequestInfo(err error) httptrace.WroteRequestInfo {
	return httptrace.WroteRequestInfo{Err: err}
}

// UserError strips the retry classification from an error of RoundTrip,
// returning the underlying read or write error as net/http does.
func UserError(err error) error {
	if e, ok := err.(nothingWrittenError); ok {
		err = e.error
	}
	if e, ok := err.(readFromServerError); ok {
		err = e.err
	}
	return err
}
