package transport

import (
	"errors"

	"github.com/ferryhttp/ferry/internal/h1conn"
)

// Errors with the texts and identities net/http callers test for.

// errRequestCanceled is returned for Request.Cancel and CancelRequest, as
// net/http does.
var errRequestCanceled = h1conn.ErrRequestCanceled

// errHeaderTimeout is ResponseHeaderTimeout's error.
var errHeaderTimeout = h1conn.ErrHeaderTimeout

// errRequestCanceledConn is net/http's error for a request that
// Request.Cancel or CancelRequest cancelled while it waited for its
// connection (queued for a MaxConnsPerHost slot, or dialling). net/http
// does not export it either; callers can only compare its text.
var errRequestCanceledConn = errors.New("net/http: request canceled while waiting for connection")

// ErrProxyNotSupported is returned (wrapped) when Proxy returns a URL whose
// scheme is none of http, https, socks5 and socks5h.
var ErrProxyNotSupported = errors.New("ferry/transport: unsupported proxy scheme")
