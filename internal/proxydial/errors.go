package proxydial

import (
	"errors"
	"fmt"
	"net"
	"net/http"
)

// StatusError reports a CONNECT request the proxy answered with a status
// other than 200. net/http reports the same case with an error whose text
// is the status text alone ("Proxy Authentication Required").
type StatusError struct {
	// Proxy is the proxy's host:port (never its credentials).
	Proxy string
	// Target is the host:port the tunnel was asked for.
	Target string
	// StatusCode is the proxy's status code, e.g. 407.
	StatusCode int
	// Status is the status text after the code ("Proxy Authentication
	// Required"); empty if the proxy sent none.
	Status string
	// Header is the response header (Proxy-Authenticate for a 407).
	Header http.Header
}

func (e *StatusError) Error() string {
	text := e.Status
	if text == "" {
		text = "(no status text)"
	}
	return fmt.Sprintf("proxydial: proxy %s refused CONNECT %s: %d %s", e.Proxy, e.Target, e.StatusCode, text)
}

// proxyConnectError wraps a failure to reach the proxy itself the way
// net/http does (a *net.OpError with Op "proxyconnect"), adding the
// proxy's address to the message.
func proxyConnectError(addr, what string, err error) error {
	return &net.OpError{Op: "proxyconnect", Net: "tcp", Err: wrapError(what+" proxy "+addr, err)}
}

// proxyReachError is proxyConnectError for a failed dial of the proxy.
// net/http's Timeout for it is the dial error's own (net.OpError looks one
// level down), so Timeout is err's own, not that of a timeout err wraps
// (a caller's dial hook may wrap one); the dialers' own errors report
// their timeouts themselves.
func proxyReachError(addr string, err error) error {
	return &net.OpError{Op: "proxyconnect", Net: "tcp", Err: wrapHookError("cannot reach proxy "+addr, err)}
}

// causeError is an error with a message put before its cause's ("msg:
// cause"). Unlike fmt.Errorf's wrapper it reports Timeout (and Temporary)
// itself, because net.OpError.Timeout and url.Error.Timeout (what
// http.Client callers test) look only at the error they hold, not down its
// chain: where net/http returns a timeout bare, ferry's wrapped error must
// still say so.
type causeError struct {
	msg     string
	err     error
	timeout bool // what Timeout reports; fixed at construction
}

// wrapError returns err with msg before it; Timeout is err's (found down
// its chain).
func wrapError(msg string, err error) error {
	return &causeError{msg: msg, err: err, timeout: isTimeout(err)}
}

// wrapHookError returns the error of a caller's callback with msg before
// it. net/http returns such an error as is, so a caller's
// url.Error.Timeout sees only what the error itself reports: Timeout is
// err's own, not that of a timeout err wraps.
func wrapHookError(msg string, err error) error {
	t, ok := err.(interface{ Timeout() bool })
	return &causeError{msg: msg, err: err, timeout: ok && t.Timeout()}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func (e *causeError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *causeError) Unwrap() error { return e.err }
func (e *causeError) Timeout() bool { return e.timeout }

// Temporary mirrors Timeout, as net errors do.
func (e *causeError) Temporary() bool { return e.timeout }
