package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ferryhttp/ferry/internal/dialer"
	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/proxydial"
	"github.com/ferryhttp/ferry/internal/sockopt"
)

// Proxies, as net/http.Transport uses them. Per request the Proxy func
// picks a proxy (nil: direct); the request then takes one of two routes:
//
//   - forwarding: an http target through an http or https proxy. The
//     connection is to the proxy itself (pooled under the proxy alone, so
//     one connection serves every http target) and requests are written in
//     absolute form with Proxy-Authorization from the proxy URL.
//   - tunnel: an https target through any proxy (CONNECT), or any target
//     through a SOCKS5 proxy. The tunnel is then used exactly like a
//     directly dialled connection: TLS for https targets (ALPN included),
//     origin-form requests, nothing proxy-related added.
//
// The proxy connection is dialled with the Transport's own dialer (lazy
// DNS, httptrace connect hooks for the proxy address), or DialContext/Dial
// when set, or DialTLSContext/DialTLS for an https proxy when set, as in
// net/http.

// ProxyStatusError is the error (wrapped) when a proxy answers CONNECT
// with a status other than 200, for example 407 Proxy Authentication
// Required. It names the proxy's host:port and the target, never the
// proxy's credentials; Header holds the proxy's response header
// (Proxy-Authenticate for a 407). net/http reports the same case with an
// error whose text is the status text alone; ferry's text contains it.
type ProxyStatusError = proxydial.StatusError

// proxyRoute is what one proxy URL means for the requests sent through it.
// It is computed once per *url.URL the Proxy func returns (see
// proxyState.last), immutable, and shared by concurrent requests.
type proxyRoute struct {
	url    *url.URL      // as the Proxy func returned it
	scheme string        // lower case, "" read as "http"
	key    proxydial.Key // pool identity, credentials only as a digest
	addr   string        // proxy host:port, the first hop (GetConn reports it)
	auth   string        // Proxy-Authorization for forwarded requests; "" if none

	// What the URL held when the route was computed: a route is reused
	// only while they are unchanged.
	rawScheme, host string
	user            *url.Userinfo
}

// forwards reports whether a request to a target with targetScheme is sent
// to the proxy itself in absolute form (http target, http or https proxy).
func (r *proxyRoute) forwards(targetScheme string) bool {
	return targetScheme == "http" && (r.scheme == "http" || r.scheme == "https")
}

// proxyState is a Transport's proxy bookkeeping. Its zero value is ready.
type proxyState struct {
	// last is the route for the URL the Proxy func returned most recently.
	// Proxy funcs usually return the same *url.URL for every request
	// (http.ProxyURL, http.ProxyFromEnvironment), so keying, address and
	// header computation run once, not per request.
	last atomic.Pointer[proxyRoute]

	cfgOnce sync.Once
	cfg     proxydial.Config // from the Transport's fields, built on first use; read-only after

	// connectTimeout bounds a CONNECT exchange or SOCKS5 handshake; zero
	// means one minute, net/http's fixed bound. Tests shorten it.
	connectTimeout time.Duration
}

// proxyRouteFor asks the Proxy func for req's proxy and returns its route,
// nil for a direct connection. The Proxy func's error is returned as is
// (as net/http does); an unusable proxy URL gives an error that names the
// proxy by scheme and host only.
func (t *Transport) proxyRouteFor(req *http.Request) (*proxyRoute, error) {
	u, err := t.Proxy(req)
	if err != nil || u == nil {
		return nil, err
	}
	if r := t.proxies.last.Load(); r != nil && r.url == u && r.rawScheme == u.Scheme && r.host == u.Host && r.user == u.User {
		return r, nil
	}
	r, err := newProxyRoute(u)
	if err != nil {
		return nil, err
	}
	t.proxies.last.Store(r)
	return r, nil
}

func newProxyRoute(u *url.URL) (*proxyRoute, error) {
	key, err := proxydial.KeyOf(u)
	if err != nil {
		// Only scheme and host: the URL's user info must not reach an
		// error string (url.URL.Redacted would still show the user name).
		label := u.Scheme + "://" + u.Host
		var se *proxydial.UnsupportedSchemeError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("ferry/transport: proxy %s: %w (%w)", label, ErrProxyNotSupported, err)
		}
		return nil, fmt.Errorf("ferry/transport: proxy %s: %w", label, err)
	}
	addr, _ := proxydial.Addr(u) // valid: KeyOf checked it
	r := &proxyRoute{
		url:       u,
		key:       key,
		addr:      addr,
		auth:      proxydial.AuthHeader(u),
		rawScheme: u.Scheme,
		host:      u.Host,
		user:      u.User,
	}
	switch s := u.Scheme; s {
	case "":
		r.scheme = "http"
	case "http", "https", "socks5", "socks5h":
		r.scheme = s
	default:
		// KeyOf accepted it, so it is one of them in another case.
		r.scheme = lowerASCII(s)
	}
	return r, nil
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// routeViaProxy consults the Proxy func for req and, when it names a
// proxy, records the route in ds and makes key say so: the proxy's
// identity, and for a forwarded request the proxy's address in place of
// the target's.
func (t *Transport) routeViaProxy(req *http.Request, key *connKey, ds *dialState) error {
	r, err := t.proxyRouteFor(req)
	if err != nil || r == nil {
		return err
	}
	ds.proxy = r
	key.proxy = r.key
	if r.forwards(key.scheme) {
		key.addr = r.addr
	}
	return nil
}

// reroute asks the Proxy func again before a retried attempt, as net/http
// does for every attempt, so that a retry can take another proxy (or none):
// a rotating or health-checked proxy list. While the route is unchanged
// the request keeps its resolved addresses.
func (t *Transport) reroute(req *http.Request, o *h1conn.Outgoing, key *connKey, ds *dialState) error {
	next, err := t.connKeyFor(req)
	if err != nil {
		return err
	}
	var nds dialState
	if err := t.routeViaProxy(req, &next, &nds); err != nil {
		return err
	}
	if next == *key {
		return nil
	}
	o.ProxyForm, o.ProxyAuth = false, ""
	if err := sendVia(o, nds.proxy, next.scheme); err != nil {
		return err
	}
	*key, *ds = next, nds
	return nil
}

// sendVia adapts o to a request forwarded to the proxy of route r: the
// absolute-form request target and Proxy-Authorization. Requests through a
// tunnel are left alone. As in net/http, a request whose Host is not a
// valid header value is refused rather than sent to a proxy with an empty
// Host.
func sendVia(o *h1conn.Outgoing, r *proxyRoute, targetScheme string) error {
	if r == nil || !r.forwards(targetScheme) {
		return nil
	}
	if o.Host == "" {
		return errors.New("http: invalid Host header")
	}
	o.ProxyForm = true
	o.ProxyAuth = r.auth
	return nil
}

// firstHop is the address GetConn reports: the proxy's when the request
// goes through one (as net/http reports), else the target's.
func (ds *dialState) firstHop(key connKey) string {
	if ds != nil && ds.proxy != nil {
		return ds.proxy.addr
	}
	return key.addr
}

// viaProxy reports whether the request goes through a proxy.
func (ds *dialState) viaProxy() bool { return ds != nil && ds.proxy != nil }

// proxyConfig returns the proxydial settings taken from the Transport's
// fields, built once.
func (t *Transport) proxyConfig() *proxydial.Config {
	t.proxies.cfgOnce.Do(func() {
		tlsCfg := t.clonedTLSConfig(t.sessionCache)
		t.proxies.cfg = proxydial.Config{
			TLSClientConfig:        tlsCfg,
			TLSHandshakeTimeout:    t.TLSHandshakeTimeout,
			ProxyConnectHeader:     t.ProxyConnectHeader,
			GetProxyConnectHeader:  t.GetProxyConnectHeader,
			OnProxyConnectResponse: t.OnProxyConnectResponse,
			ConnectTimeout:         t.proxies.connectTimeout,
			MaxResponseHeaderBytes: t.maxHeaderBytes(),
		}
	})
	return &t.proxies.cfg
}

// dialProxyHop returns the connection a proxied request's connection is
// built on: the connection to the proxy itself for a forwarded request,
// or a tunnel to key.addr otherwise (the caller then adds TLS for an https
// target, as for a direct connection). The second result carries the
// socket's guard (nil when none can be had); own reports that ferry
// dialled the socket itself (no dial hook of the caller's). For a
// forwarded request over an https proxy the connection is the *tls.Conn
// to the proxy.
func (t *Transport) dialProxyHop(ctx context.Context, key connKey, ds *dialState) (_ net.Conn, _ *dialer.Conn, own bool, _ error) {
	r := ds.proxy
	cfg := *t.proxyConfig()
	// The caller's TLS dialer reaches an https proxy, as in net/http;
	// proxydial then speaks plain HTTP over that TLS connection, and its
	// callbacks still get the Proxy func's URL.
	tlsHook := r.scheme == "https" && (t.DialTLSContext != nil || t.DialTLS != nil)
	cfg.DialsTLS = tlsHook
	var sock *dialer.Conn // the socket to the proxy when ferry dialled it
	var first net.Conn    // the connection the dial hook returned
	// The hook works on a copy of ds, written back below: capturing ds
	// itself would move every request's dialState to the heap, pooled hits
	// included.
	hop := *ds
	defer func() { ds.addrs, ds.resolved, ds.stale = hop.addrs, hop.resolved, hop.stale }()
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		var err error
		switch {
		case tlsHook:
			c, err = t.dialCallerTLS(ctx, network, addr)
		case t.DialContext != nil:
			c, err = t.DialContext(ctx, network, addr)
		case t.Dial != nil:
			c, err = t.Dial(network, addr)
		default:
			host, port, serr := net.SplitHostPort(addr)
			if serr != nil {
				return nil, serr
			}
			sock, err = t.dialItself(ctx, host, port, &hop)
			if sock != nil {
				c = sock.Conn
			}
		}
		first = c
		return c, err
	}
	var conn net.Conn
	var err error
	if r.forwards(key.scheme) {
		conn, err = proxydial.DialProxy(ctx, r.url, &cfg)
	} else {
		conn, err = proxydial.Tunnel(ctx, r.url, key.addr, &cfg)
	}
	if err != nil {
		return nil, nil, false, err
	}
	own = sock != nil
	if sock == nil {
		sock = guardedSocket(first)
	}
	return conn, sock, own, nil
}

// guardedSocket gives a socket the caller's dial hook returned a guard, so
// socket options reach it through the proxy layers above it. nil when it
// is not a socket.
func guardedSocket(c net.Conn) *dialer.Conn {
	for {
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = nc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	g, err := sockopt.NewGuard(sc)
	if err != nil {
		return nil
	}
	return &dialer.Conn{Conn: c, Guard: g}
}
