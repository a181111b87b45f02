package h3conn

import (
	"context"
	"crypto/tls"
	"math"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// Defaults for the zero Config fields.
const (
	// DefaultMaxResponseHeaderBytes is net/http's default response head limit.
	DefaultMaxResponseHeaderBytes = 10 << 20
	// DefaultHandshakeTimeout bounds a dial, name resolution included.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxConcurrentStreams is the local stream cap of a Conn.
	DefaultMaxConcurrentStreams = 100
	// DefaultKeepAlivePeriod is the QUIC keep-alive used when Config.QUICConfig
	// is nil, as quic-go's http3 client does.
	DefaultKeepAlivePeriod = 10 * time.Second
)

// Config configures a Dialer. The zero Config is usable: system roots, the
// default resolver, quic-go's defaults with keep-alives, 10 MiB response
// heads, gzip requested, a 10 s handshake limit and 100 streams a connection.
type Config struct {
	// TLSConfig is cloned for every connection. ServerName, when empty, is
	// set to the origin host (never the alternative's host); NextProtos is
	// replaced by ["h3"]; everything else (RootCAs, InsecureSkipVerify,
	// client certificates) is used as given. Nil means a zero tls.Config.
	TLSConfig *tls.Config
	// QUICConfig is cloned for every connection. Nil means quic-go's defaults
	// with DefaultKeepAlivePeriod. MaxIncomingStreams is forced to -1 (a
	// server may not open bidirectional streams), as quic-go's http3 does.
	QUICConfig *quic.Config
	// MaxResponseHeaderBytes limits the response head (it is also sent to
	// the server as SETTINGS_MAX_FIELD_SECTION_SIZE). Zero or negative means
	// DefaultMaxResponseHeaderBytes.
	MaxResponseHeaderBytes int64
	// DisableCompression stops the Conn from asking for gzip; as in
	// net/http, a response is decompressed only when gzip was asked for by
	// the Conn itself.
	DisableCompression bool
	// HandshakeTimeout bounds Dial (name resolution and the QUIC handshake).
	// Zero means DefaultHandshakeTimeout; negative means no limit other than
	// the context.
	HandshakeTimeout time.Duration
	// IdleTimeout is the QUIC idle timeout (quic.Config.MaxIdleTimeout) when
	// QUICConfig leaves it zero. Zero leaves quic-go's default (30 s). The
	// pool's own idle expiry uses Conn.IdleSince and is not this.
	IdleTimeout time.Duration
	// MaxConcurrentStreams caps the streams a Conn hands out with
	// ReserveStream. Zero or negative means DefaultMaxConcurrentStreams.
	MaxConcurrentStreams int
	// LookupNetIP resolves the alternative's host when it is not an IP
	// literal; it is responsible for the DNS httptrace hooks (ferry's DNS
	// cache fires them). Nil means net.DefaultResolver, with the hooks fired
	// here.
	LookupNetIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// Now is the clock IdleSince reports on; nil means time.Now.
	Now func() time.Time
	// OnPathDead, when set, is called once for a Conn whose network path
	// was judged dead (its packets went unacknowledged for 4 probe
	// timeouts and at least a second, see pathwatch.go), on a goroutine of
	// the Conn's, after the Conn stopped taking requests and before it is
	// closed: the requests still on it then fail with an error wrapping
	// ErrPathDead. Nil means the Conn is only closed.
	OnPathDead func(*Conn)
	// OnIdle, when set, is called each time a Conn's last stream in use or
	// reserved is given back (a response body done, a failed RoundTrip, a
	// reservation released), on the goroutine that gave it back and outside
	// the Conn's lock, so that the owner can apply its idle limits. Another
	// request may have reserved a stream again by the time it runs:
	// CloseIfIdle is the way to close the Conn only if it is still idle.
	OnIdle func(*Conn)
}

func (c *Config) maxHeaderBytes() int {
	n := c.MaxResponseHeaderBytes
	if n <= 0 {
		return DefaultMaxResponseHeaderBytes
	}
	return int(min(n, math.MaxInt32))
}

func (c *Config) maxStreams() int {
	if c.MaxConcurrentStreams <= 0 {
		return DefaultMaxConcurrentStreams
	}
	return c.MaxConcurrentStreams
}

func (c *Config) handshakeTimeout() time.Duration {
	if c.HandshakeTimeout == 0 {
		return DefaultHandshakeTimeout
	}
	return c.HandshakeTimeout
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// quicConfig returns the per-connection QUIC configuration.
func (c *Config) quicConfig() *quic.Config {
	var q *quic.Config
	if c.QUICConfig == nil {
		q = &quic.Config{KeepAlivePeriod: DefaultKeepAlivePeriod}
	} else {
		q = c.QUICConfig.Clone()
	}
	q.MaxIncomingStreams = -1
	if q.MaxIdleTimeout == 0 && c.IdleTimeout > 0 {
		q.MaxIdleTimeout = c.IdleTimeout
	}
	return q
}

// tlsConfig returns the per-connection TLS configuration for originHost.
func (c *Config) tlsConfig(originHost string) *tls.Config {
	var t *tls.Config
	if c.TLSConfig == nil {
		t = &tls.Config{}
	} else {
		t = c.TLSConfig.Clone()
	}
	if t.ServerName == "" {
		t.ServerName = originHost
	}
	t.NextProtos = []string{http3.NextProtoH3}
	return t
}
