package proxydial

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"
)

// DefaultConnectTimeout bounds a CONNECT exchange (and a SOCKS5 handshake)
// when Config.ConnectTimeout is zero: the one minute net/http uses.
const DefaultConnectTimeout = time.Minute

// DefaultMaxResponseHeaderBytes limits the CONNECT response head when
// Config.MaxResponseHeaderBytes is zero (net/http's default, 10 MiB).
const DefaultMaxResponseHeaderBytes = 10 << 20

// Config says how to reach proxies. The zero Config dials with a zero
// net.Dialer, verifies HTTPS proxies against the system roots, has no TLS
// handshake timeout, sends no extra CONNECT headers and bounds CONNECT by
// DefaultConnectTimeout. A Config is read, never modified, and may be shared
// by concurrent calls.
type Config struct {
	// Dial opens the TCP connection to the proxy (network "tcp", address
	// from Addr). The transport passes its own dialer so that its DNS
	// cache and httptrace ConnectStart/ConnectDone apply to the proxy
	// address, as in net/http. Nil means a zero net.Dialer. A (nil, nil)
	// return is reported as an error.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// DialsTLS reports that Dial returns, for an https proxy, a connection
	// already secured with TLS (the transport's DialTLSContext): no TLS is
	// added on it. The proxy URL is still the one given, so the CONNECT
	// header and response callbacks see it unchanged. False: TLS to an https
	// proxy is done here.
	DialsTLS bool

	// TLSClientConfig is used for TLS to an https proxy (net/http uses
	// Transport.TLSClientConfig for that too). It is cloned; ServerName
	// defaults to the proxy host; NextProtos is cleared (HTTP/1.1 only).
	// Nil means a zero tls.Config.
	TLSClientConfig *tls.Config

	// TLSHandshakeTimeout bounds the TLS handshake with an https proxy;
	// zero means no timeout beyond the context's. Expiry yields an error
	// whose Timeout() is true.
	TLSHandshakeTimeout time.Duration

	// ProxyConnectHeader is sent with every CONNECT request, unless
	// GetProxyConnectHeader is set. It is not modified.
	ProxyConnectHeader http.Header

	// GetProxyConnectHeader, if set, returns the headers for a CONNECT to
	// target (host:port) and ProxyConnectHeader is ignored. (nil, nil)
	// sends no extra headers; an error aborts the tunnel with that error
	// wrapped. The returned header is not modified.
	GetProxyConnectHeader func(ctx context.Context, proxyURL *url.URL, target string) (http.Header, error)

	// OnProxyConnectResponse, if set, sees the proxy's response to CONNECT
	// before its status is checked; an error aborts the tunnel with that
	// error wrapped.
	OnProxyConnectResponse func(ctx context.Context, proxyURL *url.URL, connectReq *http.Request, connectRes *http.Response) error

	// ConnectTimeout bounds the CONNECT exchange or SOCKS5 handshake
	// after the proxy connection is up (the context's deadline applies
	// too, whichever is first). Zero means DefaultConnectTimeout.
	ConnectTimeout time.Duration

	// MaxResponseHeaderBytes limits the CONNECT response head; zero means
	// DefaultMaxResponseHeaderBytes.
	MaxResponseHeaderBytes int64

	// LookupSOCKS5, if set, resolves the target host locally for "socks5"
	// proxies (not "socks5h"), and the proxy is given the first address.
	// Nil means the proxy resolves for both schemes, as in net/http.
	LookupSOCKS5 func(ctx context.Context, host string) ([]netip.Addr, error)
}

func (c *Config) connectTimeout() time.Duration {
	if c.ConnectTimeout > 0 {
		return c.ConnectTimeout
	}
	return DefaultConnectTimeout
}

func (c *Config) maxHeaderBytes() int64 {
	if c.MaxResponseHeaderBytes > 0 {
		return c.MaxResponseHeaderBytes
	}
	return DefaultMaxResponseHeaderBytes
}
