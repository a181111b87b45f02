package transport

import (
	"context"
	"crypto/tls"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhttp/ferry/altsvc"
	"github.com/ferryhttp/ferry/internal/cancelreg"
	"github.com/ferryhttp/ferry/internal/dialer"
	"github.com/ferryhttp/ferry/internal/dnscache"
	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/idlepool"
)

// Transport is an http.RoundTripper with the exported fields of
// net/http.Transport (same names, types, defaults and meaning) plus ferry's
// Resolver and DNSCacheTTL. The zero Transport is usable, with the zero
// values' meanings documented on each field (as for http.Transport); New
// returns one with http.DefaultTransport's settings.
//
// Fields must not be changed once the Transport has served a request; use
// Clone to derive a differently configured one. A Transport is safe for
// concurrent use.
type Transport struct {
	// Proxy returns the proxy for a request, consulted once per request;
	// nil, or a nil URL, means no proxy. Schemes "http" (also when empty),
	// "https", "socks5" and "socks5h" are supported as in net/http; any
	// other fails the request with an error wrapping ErrProxyNotSupported.
	// User info in the URL authenticates to the proxy (Basic
	// Proxy-Authorization, or SOCKS5 user/password) and never reaches the
	// origin or an error string. The proxy is part of the connection's
	// pool key.
	Proxy func(*http.Request) (*url.URL, error)

	// OnProxyConnectResponse, if set, is called with an http(s) proxy's
	// response to CONNECT before its status is checked; an error aborts
	// the connection with that error wrapped.
	OnProxyConnectResponse func(ctx context.Context, proxyURL *url.URL, connectReq *http.Request, connectRes *http.Response) error

	// DialContext dials unencrypted TCP connections, receiving "host:port"
	// unresolved as in net/http. Nil means ferry dials itself: names are
	// resolved through a DNS cache (see Resolver, DNSCacheTTL) and
	// addresses raced (Happy Eyeballs) with a 30s timeout and 30s TCP
	// keep-alive, like net/http's default dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// Dial is the deprecated form of DialContext, used when DialContext is
	// nil.
	Dial func(network, addr string) (net.Conn, error)

	// DialTLSContext dials TLS connections for https requests. The returned
	// connection is used as is (a *tls.Conn not yet handshaken is
	// handshaken); TLSClientConfig and TLSHandshakeTimeout are then unused.
	DialTLSContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// DialTLS is the deprecated form of DialTLSContext.
	DialTLS func(network, addr string) (net.Conn, error)

	// TLSClientConfig is cloned for every TLS connection, with ServerName
	// defaulted to the host and NextProtos adjusted to the protocols in use
	// as net/http does (see Protocols). Setting it turns automatic HTTP/2
	// off unless ForceAttemptHTTP2 is set, as in net/http. Nil means the
	// default configuration. When it has no ClientSessionCache, ferry uses
	// one LRU session cache per Transport so reconnects resume sessions
	// (net/http uses none).
	TLSClientConfig *tls.Config

	// TLSHandshakeTimeout bounds the TLS handshake; zero means no timeout.
	TLSHandshakeTimeout time.Duration

	// DisableKeepAlives sends "Connection: close" and uses every connection
	// for a single request.
	DisableKeepAlives bool

	// DisableCompression stops the transport from asking for gzip and
	// decoding it.
	DisableCompression bool

	// MaxIdleConns caps idle connections over all hosts; zero means no
	// limit. HTTP/3 connections without a request in flight count too:
	// beyond the cap, idle TCP connections of origins served over HTTP/3
	// are closed first, then the oldest idle HTTP/3 connections.
	MaxIdleConns int

	// MaxIdleConnsPerHost caps idle connections per host; zero means
	// http.DefaultMaxIdleConnsPerHost (2), negative keeps none. An
	// origin's idle HTTP/3 connections count with its idle TCP ones;
	// beyond the cap the TCP ones are closed first.
	MaxIdleConnsPerHost int

	// MaxConnsPerHost limits connections per host (dialing, active and
	// idle); requests over it wait in order, cancellably. Zero means no
	// limit.
	MaxConnsPerHost int

	// IdleConnTimeout closes connections idle for longer; zero means no
	// limit.
	IdleConnTimeout time.Duration

	// ResponseHeaderTimeout bounds the wait for the response head after
	// the request is fully written; the error's Timeout() is true. Zero
	// means no timeout.
	ResponseHeaderTimeout time.Duration

	// ExpectContinueTimeout is how long a request with "Expect:
	// 100-continue" waits for the server's go-ahead before sending the body
	// anyway; zero sends the body at once.
	ExpectContinueTimeout time.Duration

	// TLSNextProto, as in net/http: a non-nil map without an "h2" entry
	// (an empty map, say) turns HTTP/2 off; a caller's function for the
	// protocol a TLS handshake negotiated is handed the connection and
	// its RoundTripper serves every request of that origin. Entries that
	// net/http itself installed (From of a used http.Transport) mean
	// ferry's own HTTP/2. Nil means HTTP/2 by ferry when allowed.
	TLSNextProto map[string]func(authority string, c *tls.Conn) http.RoundTripper

	// ProxyConnectHeader is sent with every CONNECT request to an http(s)
	// proxy, unless GetProxyConnectHeader is set. It is not modified.
	ProxyConnectHeader http.Header

	// GetProxyConnectHeader, if set, returns the headers for a CONNECT to
	// target (host:port) through proxyURL, replacing ProxyConnectHeader;
	// an error fails the request with that error wrapped.
	GetProxyConnectHeader func(ctx context.Context, proxyURL *url.URL, target string) (http.Header, error)

	// MaxResponseHeaderBytes limits the response head; zero or negative means 10 MiB
	// (net/http's default). Over it the request fails.
	MaxResponseHeaderBytes int64

	// WriteBufferSize is the per-connection write buffer; zero means 4 KiB.
	WriteBufferSize int

	// ReadBufferSize is the per-connection read buffer; zero means 4 KiB.
	ReadBufferSize int

	// ForceAttemptHTTP2 keeps HTTP/2 on although TLSClientConfig, Dial,
	// DialContext, DialTLS or DialTLSContext is set (each of which turns
	// it off otherwise, as in net/http).
	ForceAttemptHTTP2 bool

	// HTTP2 configures HTTP/2 connections as in net/http
	// (StrictMaxConcurrentRequests, header table and frame sizes, receive
	// buffers, ping health checks, WriteByteTimeout, CountError). Nil means
	// the defaults: a request that finds every connection to its origin at
	// the server's stream limit opens another connection.
	HTTP2 *http.HTTP2Config

	// Protocols is the exact set of protocols to use, as in net/http; nil
	// means HTTP/1 plus HTTP/2 when allowed (see ForceAttemptHTTP2,
	// TLSNextProto). UnencryptedHTTP2 without HTTP1 sends http:// requests
	// as HTTP/2 with prior knowledge (h2c). A set with no protocol fails
	// requests.
	Protocols *http.Protocols

	// Resolver resolves host names when ferry dials itself (DialContext
	// nil). Nil means net.DefaultResolver.
	Resolver *net.Resolver

	// DNSCacheTTL is how long resolved addresses are reused. Zero means
	// the cache's default TTL; negative disables caching.
	DNSCacheTTL time.Duration

	// AltSvc is the Alt-Svc cache (RFC 7838) that https responses feed and
	// that routes requests to HTTP/3. Nil means a private cache created on
	// first use. A cache may be shared by several Transports, inspected,
	// and saved and loaded (altsvc.Cache.Save, Load) so a process starts
	// warm. Not in net/http.
	AltSvc *altsvc.Cache

	// DisableHTTP3 turns HTTP/3 off: Alt-Svc headers are ignored and every
	// request goes over TCP, as with net/http. HTTP/3 is also not used when
	// DisableKeepAlives or a Dial/DialTLS hook is set (those hand every
	// connection to the caller), nor when HTTP/2 is turned off explicitly
	// (Protocols without HTTP2, a TLSNextProto map without "h2", GODEBUG
	// http2client=0). Not in net/http.
	DisableHTTP3 bool

	h3           h3Client // HTTP/3 connections, dials and the Alt-Svc cache in use
	h2           h2State  // protocol selection, HTTP/2 settings, dial coalescing
	initOnce     sync.Once
	pool         *idlepool.Pool[connKey, *h1Conn]
	dialer       *dialer.Dialer
	sessionCache tls.ClientSessionCache
	cancels      cancelRegistry  // requests in flight, for CancelRequest
	waitsArmed   atomic.Int64    // connWaits armed: requests that waited or dialled (getconn.go)
	originAddrs  originAddrCache // host:port of recent port-less URL hosts
	proxies      proxyState
	// closeIdle: CloseIdleConnections ran and no request has asked for a
	// connection since; an HTTP/1.1 connection that would go idle is closed
	// instead (net/http's closeIdle; h1Conn.finish, getConn).
	closeIdle atomic.Bool
	drainTime time.Duration // drain window (h1conn.Config.DrainTime); zero means net/http's 50ms, tests lengthen it
	// writeWaited, when set (tests), is called each time the end of an
	// HTTP/1.1 response waits for the request body's writer (writeDone).
	writeWaited func()
	// dnsClock, when set before first use (tests only), is the DNS cache's
	// clock. Nil means time.Now.
	dnsClock func() time.Time
	stats    transportStats // request-path counters behind Stats (stats.go)
	// fixedProtos, set before first use by Install's adoption for a
	// Transport built after the adopted http.Transport's first use, is the
	// protocol set net/http fixed at that first use (computeProtocols).
	fixedProtos *protoSet
	// line, set before first use by Install's adoption, is the set of
	// Transports built for one Install; Stats of each covers them all.
	line  *lineage
	h1cfg h1conn.Config // what HTTP/1.1 connections read of the settings (h1Config)
}

// New returns a Transport with http.DefaultTransport's settings:
// ProxyFromEnvironment, 30s dial timeout with 30s keep-alive (ferry's own
// dialer: DialContext stays nil), ForceAttemptHTTP2, MaxIdleConns 100,
// IdleConnTimeout 90s, TLSHandshakeTimeout 10s, ExpectContinueTimeout 1s.
func New() *Transport {
	return &Transport{
		Proxy:                 http.ProxyFromEnvironment,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
}

// From returns a Transport with every setting of t copied (TLSClientConfig
// cloned). A nil t gives New().
func From(t *http.Transport) *Transport {
	if t == nil {
		return New()
	}
	f := fromSharingTLS(t)
	f.TLSClientConfig = f.TLSClientConfig.Clone()
	return f
}

// fromSharingTLS is From(t) (t non-nil) with t's TLSClientConfig itself
// rather than a clone: Install's adoption shares it, and does not read it
// while net/http's first-use setup may be writing its NextProtos.
func fromSharingTLS(t *http.Transport) *Transport {
	f := &Transport{}
	copyStdSettings(f, reflect.ValueOf(t).Elem())
	return f
}

// Clone returns a copy of t's settings (TLSClientConfig cloned) with
// fresh connection state.
func (t *Transport) Clone() *Transport {
	c := &Transport{
		Resolver:     t.Resolver,
		DNSCacheTTL:  t.DNSCacheTTL,
		AltSvc:       t.AltSvc,
		DisableHTTP3: t.DisableHTTP3,
	}
	copyStdSettings(c, reflect.ValueOf(t).Elem())
	c.TLSClientConfig = c.TLSClientConfig.Clone()
	return c
}

// stdSettingNames lists the exported fields of http.Transport: its
// settings. Transport declares each with the same name and type
// (TestFromCopiesEveryField holds that), so From and Clone copy them by
// name and a setting can never be forgotten in one of the two.
var stdSettingNames = sync.OnceValue(func() []string {
	st := reflect.TypeFor[http.Transport]()
	var names []string
	for i := 0; i < st.NumField(); i++ {
		if f := st.Field(i); f.IsExported() {
			names = append(names, f.Name)
		}
	}
	return names
})

// copyStdSettings sets dst's net/http settings from src, a struct value of
// type http.Transport or Transport, then gives dst its own copy of every
// setting that points at mutable data but TLSClientConfig (which the
// caller clones, as net/http's Clone does): ProxyConnectHeader,
// TLSNextProto, HTTP2 and Protocols.
func copyStdSettings(dst *Transport, src reflect.Value) {
	dv := reflect.ValueOf(dst).Elem()
	for _, name := range stdSettingNames() {
		d, s := dv.FieldByName(name), src.FieldByName(name)
		if d.IsValid() && s.IsValid() && d.Type() == s.Type() {
			d.Set(s)
		}
	}
	dst.ProxyConnectHeader = dst.ProxyConnectHeader.Clone()
	if dst.TLSNextProto != nil {
		dst.TLSNextProto = maps.Clone(dst.TLSNextProto)
	}
	if dst.HTTP2 != nil {
		h := *dst.HTTP2
		dst.HTTP2 = &h
	}
	if dst.Protocols != nil {
		p := *dst.Protocols
		dst.Protocols = &p
	}
}

// init builds the pool, dialer and session cache from the fields, once.
func (t *Transport) init() {
	t.initOnce.Do(func() {
		t.pool = idlepool.New[connKey, *h1Conn](idlepool.Config{
			MaxIdlePerKey:  t.MaxIdleConnsPerHost,
			MaxIdle:        t.MaxIdleConns,
			IdleTimeout:    t.IdleConnTimeout,
			MaxConnsPerKey: t.MaxConnsPerHost,
			Clock:          t.h2.clock,
		})
		t.h1Config()
		t.initH2()
		t.dialer = &dialer.Dialer{
			DNS:       dnscache.New(dnscache.Config{Resolver: t.Resolver, TTL: t.DNSCacheTTL, Clock: t.dnsClock}),
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}
		if t.TLSClientConfig == nil || t.TLSClientConfig.ClientSessionCache == nil {
			t.sessionCache = tls.NewLRUClientSessionCache(0)
		}
	})
}

// CloseIdleConnections closes the connections now idle. It does not
// interrupt connections in use, but, as with net/http, an HTTP/1.1
// connection in use when it is called is closed instead of kept idle when
// its request ends, unless a newer request has asked for a connection since
// or one is queued for it (MaxConnsPerHost); this includes a connection
// still draining a response body closed early (Go 1.27).
// HTTP/3 connections without a request in flight are closed too; once none
// is left in use, the UDP socket they shared is closed and QUIC handshakes
// still in progress are abandoned, so nothing of HTTP/3 outlives the call.
func (t *Transport) CloseIdleConnections() {
	t.init()
	t.closeIdle.Store(true) // before the sweep: see h1conn.Conn.finish
	t.pool.CloseIdle()
	t.closeIdleShared()
	t.closeIdleH3()
}

// CancelRequest cancels an in-flight request. A request still waiting for
// its connection (queued for a MaxConnsPerHost slot, dialling, or waiting
// for another request's HTTP/2 dial) ends with net/http's "net/http:
// request canceled while waiting for connection", and a connection dialled
// for it goes to the pool; once it has its connection, CancelRequest aborts
// that connection (HTTP/1.1) or its stream (HTTP/3); an HTTP/2 request that
// has its stream is not cancelled, as in net/http. A call that lands as
// the request moves from one of those phases to the next (or before it
// looked in the pool) finds nothing to cancel.
//
// Deprecated: use a request context (Request.WithContext) instead, as for
// net/http.
func (t *Transport) CancelRequest(req *http.Request) {
	t.cancels.Cancel(req, errRequestCanceled)
}

// The CancelRequest registry (internal/cancelreg): an entry cancels an
// HTTP/1.1 exchange through its connection, anything else through Stop.
type (
	cancelRegistry = cancelreg.Registry[*h1Conn]
	cancelEntry    = cancelreg.Entry[*h1Conn]
)

func (t *Transport) maxHeaderBytes() int64 {
	if t.MaxResponseHeaderBytes > 0 {
		return t.MaxResponseHeaderBytes
	}
	return 10 << 20 // also for a negative value, as net/http
}
