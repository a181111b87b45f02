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
	return &net.OpError{Op: "proxyconnect", Net: "tcp", Err: &proxyCause{msg: what + " proxy " + addr, err: err}}
}

// proxyCause is the Err of a "proxyconnect" *net.OpError. It reports
// Timeout() from its cause, because net.OpError.Timeout only looks one
// level down.
type proxyCause struct {
	msg string
	err error
}

func (e *proxyCause) Error() string { return e.msg + ": " + e.err.Error() }
func (e *proxyCause) Unwrap() error { return e.err }

func (e *proxyCause) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.err, &t) && t.Timeout()
}

// Temporary mirrors Timeout, as net errors do.
func (e *proxyCause) Temporary() bool { return e.Timeout() }
