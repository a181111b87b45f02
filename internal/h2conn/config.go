package h2conn

import (
	"net/http"
	"time"
)

// Config is what a connection takes from ferry's transport settings. The zero
// Config gives net/http's defaults for an HTTP/2 connection: a 10 MiB
// response header limit, transparent gzip, no ping health check, no response
// header timeout, and a new connection (not waiting) when one is full.
type Config struct {
	// HTTP2 is http.Transport.HTTP2. Honoured:
	// StrictMaxConcurrentRequests, MaxDecoderHeaderTableSize,
	// MaxEncoderHeaderTableSize, MaxReadFrameSize,
	// MaxReceiveBufferPerConnection, MaxReceiveBufferPerStream,
	// SendPingTimeout (ping health check after that long without a frame),
	// PingTimeout (close when its answer takes longer; default 15 s),
	// WriteByteTimeout and CountError. MaxConcurrentStreams and
	// PermitProhibitedCipherSuites are server settings and have no effect.
	// Nil means all defaults. The value is copied by NewClientConn.
	HTTP2 *http.HTTP2Config

	// MaxResponseHeaderBytes is http.Transport.MaxResponseHeaderBytes: it
	// becomes SETTINGS_MAX_HEADER_LIST_SIZE (padded by 320 bytes for the
	// per-field overhead, as net/http does) and bounds the response headers.
	// Zero means 10 MiB; a negative value also means the default.
	MaxResponseHeaderBytes int64

	// DisableCompression is http.Transport.DisableCompression: without it a
	// request with no Accept-Encoding (and no Range, not HEAD) asks for gzip
	// and the response is decompressed transparently.
	DisableCompression bool

	// DisableKeepAlives makes the connection single-use: after one request
	// it is no longer Usable and closes itself when the response ends.
	DisableKeepAlives bool

	// ExpectContinueTimeout is http.Transport.ExpectContinueTimeout: how long
	// a request with "Expect: 100-continue" waits before sending its body.
	// Zero sends the body at once.
	ExpectContinueTimeout time.Duration

	// ResponseHeaderTimeout is http.Transport.ResponseHeaderTimeout: how long
	// to wait for the response head after the request is written. Zero means
	// no limit.
	ResponseHeaderTimeout time.Duration

	// StrictMaxConcurrentStreams makes the peer's concurrent-stream limit
	// global: ReserveStream succeeds on a full but usable connection and
	// RoundTrip waits for a stream, instead of the caller opening another
	// connection. It is ORed with HTTP2.StrictMaxConcurrentRequests.
	StrictMaxConcurrentStreams bool

	// Clock returns the current time for IdleSince and GotConn's IdleTime.
	// Nil means time.Now. Give it the idle pool's clock.
	Clock func() time.Time
}

// strict reports whether the stream limit is global for this config.
func (c *Config) strict() bool {
	return c.StrictMaxConcurrentStreams || (c.HTTP2 != nil && c.HTTP2.StrictMaxConcurrentRequests)
}
