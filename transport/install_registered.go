package transport

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Adoption through net/http's RegisterProtocol: Install registers an
// adoption for "https" and "http" on http.DefaultTransport, which stays an
// *http.Transport. net/http hands each request for those schemes to the
// adoption first; the adoption sends it with ferry, or returns
// http.ErrSkipAltProtocol and net/http sends it itself.
//
// The registered value is registeredAdoption, a struct with one exported
// field whose type has CloseIdleConnections: net/http (1.26 and 1.27)
// takes such a value, registered for "https" before the transport's first
// use, for an HTTP/2 implementation of the caller's. It then neither
// configures its bundled HTTP/2 (which would register "https" itself,
// fail, and log "Error enabling Transport HTTP/2 support") nor leaves
// CloseIdleConnections to itself: the transport's CloseIdleConnections
// calls the field's, which closes ferry's idle connections.

// adoption routes the requests of one *http.Transport (std) to a ferry
// Transport while std's settings are those ferry was built from.
type adoption struct {
	std *http.Transport
	cur atomic.Pointer[adopted] // nil: not installed (undone), decline all
}

// adopted is one Install: the ferry Transport and std's settings it was
// built from.
type adopted struct {
	t    *Transport
	seen stdSnapshot
}

// registeredAdoption is what is registered with RegisterProtocol; see the
// comment at the top of the file for why it has exactly one exported
// field.
type registeredAdoption struct{ Adoption *adoption }

func (r registeredAdoption) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.Adoption.RoundTrip(req)
}

// RoundTrip sends req with ferry, or declines it (http.ErrSkipAltProtocol,
// net/http then sends it) when nothing is installed or a setting of std
// changed since Install: ferry would not apply the change, net/http does.
// Requests net/http keeps to itself never get here (an https WebSocket
// upgrade goes over its HTTP/1 path directly); an http:// Upgrade or
// CONNECT request does, and ferry sends it over HTTP/1.1 as net/http
// would.
func (a *adoption) RoundTrip(req *http.Request) (*http.Response, error) {
	c := a.cur.Load()
	if c == nil || !c.seen.matches(a.std) {
		return nil, http.ErrSkipAltProtocol
	}
	return c.t.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the installed
// ferry Transport; std's CloseIdleConnections calls it.
func (a *adoption) CloseIdleConnections() {
	if c := a.cur.Load(); c != nil {
		c.t.CloseIdleConnections()
	}
}

// adoptions holds the adoption registered on each *http.Transport Install
// has seen as http.DefaultTransport: a registration cannot be undone, so
// a later Install on the same transport reuses it.
var adoptions struct {
	mu sync.Mutex // guards m
	m  map[*http.Transport]*adoption
}

// adoptionFor returns std's adoption, registering one for "https" and
// "http" the first time. It fails, registering nothing, when "https" is
// taken: std was used already (net/http's HTTP/2 registered it) or the
// program registered a handler of its own.
func adoptionFor(std *http.Transport) (*adoption, error) {
	adoptions.mu.Lock()
	a := adoptions.m[std]
	var err error
	fresh := false
	if a == nil {
		if a, err = registerAdoption(std); err == nil {
			if adoptions.m == nil {
				adoptions.m = make(map[*http.Transport]*adoption)
			}
			adoptions.m[std] = a
			fresh = true
		}
	}
	adoptions.mu.Unlock()
	if fresh {
		setUpProtocols(std)
	}
	return a, err
}

// registerAdoption registers a new adoption on std for "https" and then
// "http". If "http" is taken (by the program), https requests still go
// through the adoption and http ones stay with net/http. The caller runs
// setUpProtocols(std) next.
func registerAdoption(std *http.Transport) (*adoption, error) {
	if _, ok := std.TLSNextProto["h2"]; ok {
		// std was used (net/http's HTTP/2 holds "https" now) or the
		// program installed an HTTP/2 of its own.
		return nil, fmt.Errorf("ferry: http.Transport has an h2 TLSNextProto entry; its https scheme is taken")
	}
	a := &adoption{std: std}
	if err := registerProtocol(std, "https", registeredAdoption{a}); err != nil {
		return nil, err
	}
	_ = registerProtocol(std, "http", registeredAdoption{a})
	// Stock net/http gives the transport a TLSClientConfig at its first
	// use (configuring HTTP/2); with the adoption registered it does not,
	// so give it the empty one it would have: code doing
	// Clone().TLSClientConfig.InsecureSkipVerify = true must not meet a
	// nil config. An empty config leaves every setting at its default.
	if std.TLSClientConfig == nil && std.ForceAttemptHTTP2 {
		std.TLSClientConfig = &tls.Config{}
	}
	return a, nil
}

// setUpProtocols runs net/http's one-time protocol setup of std now,
// while the registration is fresh: it finds the adoption and routes std's
// CloseIdleConnections to it (not under GODEBUG=http2client=0, with which
// net/http skips that setup). No connection is idle yet, so nothing else
// happens.
func setUpProtocols(std *http.Transport) { std.CloseIdleConnections() }

// registerProtocol is std.RegisterProtocol, with its panic (scheme taken)
// returned as an error.
func registerProtocol(std *http.Transport, scheme string, rt http.RoundTripper) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ferry: cannot register for %s: %v", scheme, p)
		}
	}()
	std.RegisterProtocol(scheme, rt)
	return nil
}

// install builds a ferry Transport from std's settings and routes std's
// requests to it, returning the Transport and the undo function.
func (a *adoption) install() (*Transport, func()) {
	t := fromDisplaced(a.std)
	// Share the TLS config instead of From's clone: ferry, like net/http,
	// clones it for every connection, so a program that changes it in
	// place (RootCAs, InsecureSkipVerify, Certificates...) is obeyed by
	// both. ALPN (NextProtos) is read once, when t is first used.
	t.TLSClientConfig = a.std.TLSClientConfig
	c := &adopted{t: t, seen: snapshotOf(a.std)}
	a.cur.Store(c)
	return t, func() { a.cur.CompareAndSwap(c, nil) }
}

// stdSnapshot is the identity of every exported field of an
// http.Transport (its settings): values for numbers and booleans, the
// pointer for pointers, maps and functions (a function value's pointer is
// that of its closure or method value, so a new DialContext of the same
// method on another net.Dialer differs), plus the length of maps and the
// value of Protocols. Two snapshots compare with ==; taking one is about
// 30 loads. It does not see a map, TLS config or HTTP2Config changed in
// place (see Install's documentation).
// TestStdSnapshotCoversEveryField holds the field list to net/http's.
type stdSnapshot struct {
	proxy, onProxyConnectResponse        unsafe.Pointer
	dialContext, dial                    unsafe.Pointer
	dialTLSContext, dialTLS              unsafe.Pointer
	getProxyConnectHeader                unsafe.Pointer
	tlsClientConfig                      *tls.Config
	tlsHandshakeTimeout, idleConnTimeout time.Duration
	responseHeaderTimeout                time.Duration
	expectContinueTimeout                time.Duration
	disableKeepAlives                    bool
	disableCompression                   bool
	forceAttemptHTTP2                    bool
	maxIdleConns, maxIdleConnsPerHost    int
	maxConnsPerHost                      int
	writeBufferSize, readBufferSize      int
	maxResponseHeaderBytes               int64
	tlsNextProto, proxyConnectHeader     unsafe.Pointer
	tlsNextProtoLen, proxyConnectHdrLen  int
	http2                                *http.HTTP2Config
	protocols                            *http.Protocols
	protocolsValue                       http.Protocols
}

// snapshotOf takes the snapshot of t's settings.
func snapshotOf(t *http.Transport) stdSnapshot {
	s := stdSnapshot{
		proxy:                  funcID(&t.Proxy),
		onProxyConnectResponse: funcID(&t.OnProxyConnectResponse),
		dialContext:            funcID(&t.DialContext),
		dial:                   funcID(&t.Dial),
		dialTLSContext:         funcID(&t.DialTLSContext),
		dialTLS:                funcID(&t.DialTLS),
		getProxyConnectHeader:  funcID(&t.GetProxyConnectHeader),
		tlsClientConfig:        t.TLSClientConfig,
		tlsHandshakeTimeout:    t.TLSHandshakeTimeout,
		idleConnTimeout:        t.IdleConnTimeout,
		responseHeaderTimeout:  t.ResponseHeaderTimeout,
		expectContinueTimeout:  t.ExpectContinueTimeout,
		disableKeepAlives:      t.DisableKeepAlives,
		disableCompression:     t.DisableCompression,
		forceAttemptHTTP2:      t.ForceAttemptHTTP2,
		maxIdleConns:           t.MaxIdleConns,
		maxIdleConnsPerHost:    t.MaxIdleConnsPerHost,
		maxConnsPerHost:        t.MaxConnsPerHost,
		writeBufferSize:        t.WriteBufferSize,
		readBufferSize:         t.ReadBufferSize,
		maxResponseHeaderBytes: t.MaxResponseHeaderBytes,
		tlsNextProto:           *(*unsafe.Pointer)(unsafe.Pointer(&t.TLSNextProto)),
		tlsNextProtoLen:        len(t.TLSNextProto),
		proxyConnectHeader:     *(*unsafe.Pointer)(unsafe.Pointer(&t.ProxyConnectHeader)),
		proxyConnectHdrLen:     len(t.ProxyConnectHeader),
		http2:                  t.HTTP2,
		protocols:              t.Protocols,
	}
	if t.Protocols != nil {
		s.protocolsValue = *t.Protocols
	}
	return s
}

// matches reports whether t's settings are those s was taken from; it is
// snapshotOf(t) == s without building the snapshot, stopping at the first
// difference.
func (s *stdSnapshot) matches(t *http.Transport) bool {
	return s.proxy == funcID(&t.Proxy) &&
		s.dialContext == funcID(&t.DialContext) &&
		s.tlsClientConfig == t.TLSClientConfig &&
		s.onProxyConnectResponse == funcID(&t.OnProxyConnectResponse) &&
		s.dial == funcID(&t.Dial) &&
		s.dialTLSContext == funcID(&t.DialTLSContext) &&
		s.dialTLS == funcID(&t.DialTLS) &&
		s.getProxyConnectHeader == funcID(&t.GetProxyConnectHeader) &&
		s.tlsHandshakeTimeout == t.TLSHandshakeTimeout &&
		s.idleConnTimeout == t.IdleConnTimeout &&
		s.responseHeaderTimeout == t.ResponseHeaderTimeout &&
		s.expectContinueTimeout == t.ExpectContinueTimeout &&
		s.disableKeepAlives == t.DisableKeepAlives &&
		s.disableCompression == t.DisableCompression &&
		s.forceAttemptHTTP2 == t.ForceAttemptHTTP2 &&
		s.maxIdleConns == t.MaxIdleConns &&
		s.maxIdleConnsPerHost == t.MaxIdleConnsPerHost &&
		s.maxConnsPerHost == t.MaxConnsPerHost &&
		s.writeBufferSize == t.WriteBufferSize &&
		s.readBufferSize == t.ReadBufferSize &&
		s.maxResponseHeaderBytes == t.MaxResponseHeaderBytes &&
		s.tlsNextProto == *(*unsafe.Pointer)(unsafe.Pointer(&t.TLSNextProto)) &&
		s.tlsNextProtoLen == len(t.TLSNextProto) &&
		s.proxyConnectHeader == *(*unsafe.Pointer)(unsafe.Pointer(&t.ProxyConnectHeader)) &&
		s.proxyConnectHdrLen == len(t.ProxyConnectHeader) &&
		s.http2 == t.HTTP2 &&
		s.protocols == t.Protocols &&
		(t.Protocols == nil || s.protocolsValue == *t.Protocols)
}

// funcID is the identity of the function value *f: the pointer a func
// value holds (its closure or method value; the same for every use of a
// top-level function), nil for a nil function.
func funcID[F any](f *F) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(f)) }
