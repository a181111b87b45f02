package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"

	"github.com/ferryhttp/ferry/internal/dialer"
	"github.com/ferryhttp/ferry/internal/dnscache"
	"github.com/ferryhttp/ferry/internal/sockio"
	"github.com/ferryhttp/ferry/internal/sockopt"
)

// dialedConn is a connection just dialled (and TLS-negotiated for https),
// before it becomes an HTTP/1.1 *h1Conn or an HTTP/2 connection: the
// HTTP/2 path never builds the h1Conn and its read and write buffers.
type dialedConn struct {
	conn     net.Conn
	tlsState *tls.ConnectionState // nil for cleartext
	guard    *sockopt.Guard       // nil when ferry did not dial itself
}

// dialConn opens an HTTP/1.1 connection for key (dialRaw, then the
// connection's buffers).
func (t *Transport) dialConn(ctx context.Context, key connKey, ds *dialState) (*h1Conn, error) {
	d, err := t.dialRaw(ctx, key, ds)
	if err != nil {
		return nil, err
	}
	return newH1Conn(t, key, d), nil
}

// dialRaw opens a connection for key: the caller's DialTLSContext /
// DialContext (given "host:port" unresolved, as net/http does) or ferry's
// dialer (DNS at most once per request), then TLS for https.
func (t *Transport) dialRaw(ctx context.Context, key connKey, ds *dialState) (dialedConn, error) {
	isTLS := key.scheme == "https"
	host, portStr, err := net.SplitHostPort(key.addr)
	if err != nil {
		return dialedConn{}, err
	}
	if isTLS && !ds.viaProxy() && (t.DialTLSContext != nil || t.DialTLS != nil) {
		conn, err := t.dialCallerTLS(ctx, "tcp", key.addr)
		if err != nil {
			return dialedConn{}, err
		}
		return dialedConn{conn: conn, tlsState: tlsStateOf(conn)}, nil
	}

	var raw net.Conn
	var guardConn *dialer.Conn
	own := false // ferry dialled the socket itself, with no hook of the caller's
	switch {
	case ds.viaProxy():
		raw, guardConn, own, err = t.dialProxyHop(ctx, key, ds)
	case t.DialContext != nil:
		raw, err = t.DialContext(ctx, "tcp", key.addr)
	case t.Dial != nil:
		raw, err = t.Dial("tcp", key.addr)
	default:
		guardConn, err = t.dialItself(ctx, host, portStr, ds)
		if guardConn != nil {
			raw, own = guardConn.Conn, true
		}
	}
	if err != nil {
		return dialedConn{}, err
	}
	if raw == nil {
		return dialedConn{}, errors.New("net/http: Transport.Dial hook returned (nil, nil)")
	}
	if own {
		// A socket ferry opened itself is read and written with raw
		// system calls (internal/sockio), under TLS and in cleartext; a
		// caller's dialled connection is used as it came. Over TLS the
		// socket stays reachable through the *tls.Conn's NetConn; in
		// cleartext the connections' NetConn unwraps it, so GotConn is
		// shown the *net.TCPConn as dialled. (An https proxy's *tls.Conn
		// is not a TCPConn: Wrap leaves it as it is.)
		raw = sockio.Wrap(raw)
	}
	d := dialedConn{conn: raw}
	if isTLS {
		tc, err := dialer.HandshakeTLS(ctx, raw, t.tlsConfigForKey(host, key), t.TLSHandshakeTimeout)
		if err != nil {
			return dialedConn{}, err
		}
		cs := tc.ConnectionState()
		d.tlsState = &cs
		d.conn = tc
	} else if ds.viaProxy() {
		d.tlsState = tlsStateOf(raw) // an https proxy forwarding http: net/http reports its TLS
	}
	if guardConn != nil {
		d.guard = guardConn.Guard
	}
	return d, nil
}

// dialItself resolves host once per request (kept in ds for retries) and
// races its addresses.
func (t *Transport) dialItself(ctx context.Context, host, portStr string, ds *dialState) (*dialer.Conn, error) {
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "invalid port", Addr: portStr}}
	}
	host = trimBrackets(host)
	if !ds.resolved {
		// The dial timeout covers the lookup too, as net.Dialer's does
		// (DialAddrs then gets what is left of it). An IP literal needs no
		// lookup, and no timer.
		if _, literal := dnscache.ParseIPLiteral(host); !literal && t.dialer.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, t.dialer.Timeout)
			defer cancel()
		}
		addrs, stale, err := t.dialer.ResolveStale(ctx, host)
		if err != nil {
			return nil, err
		}
		ds.addrs, ds.resolved, ds.stale = addrs, true, stale
	}
	c, err := t.dialer.DialAddrs(ctx, ds.addrs, uint16(port))
	if err == nil || !ds.stale || ctx.Err() != nil {
		return c, err
	}
	// None of a stale answer's addresses took the connection: the name may
	// have moved, and the refresh that answer started (or one more lookup)
	// says where. Its new addresses are dialled before the request fails;
	// an answer that did not change fails with the first dial's error. Once
	// per request: the answer kept for retries is no longer stale.
	ds.stale = false
	answer, untried := t.dialer.Reresolve(ctx, host, ds.addrs)
	if len(untried) == 0 {
		return nil, err
	}
	ds.addrs = answer
	return t.dialer.DialAddrs(ctx, untried, uint16(port))
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// tlsConfigFor clones TLSClientConfig for one connection: ServerName
// defaults to host, ALPN offers only "http/1.1" (tlsConfigForKey sets the
// list a key negotiates), and the Transport's session cache is used when
// the config has none.
func (t *Transport) tlsConfigFor(host string) *tls.Config {
	cfg := t.clonedTLSConfig(t.sessionCache)
	if cfg.ServerName == "" {
		cfg.ServerName = trimBrackets(host)
	}
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

// clonedTLSConfig is a copy of TLSClientConfig (an empty config when it is
// nil) that resumes sessions from cache unless the caller set a cache.
func (t *Transport) clonedTLSConfig(cache tls.ClientSessionCache) *tls.Config {
	var cfg *tls.Config
	if t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ClientSessionCache == nil {
		cfg.ClientSessionCache = cache
	}
	return cfg
}

// dialCallerTLS dials addr (the origin, or an https proxy) with the
// caller's DialTLSContext or DialTLS and completes the handshake of a
// *tls.Conn not yet handshaken, firing the httptrace TLS hooks, as net/http
// does.
func (t *Transport) dialCallerTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if t.DialTLSContext != nil {
		conn, err = t.DialTLSContext(ctx, network, addr)
	} else {
		conn, err = t.DialTLS(network, addr)
	}
	if err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, errors.New("net/http: Transport.DialTLS or DialTLSContext returned (nil, nil)")
	}
	// As net/http: no TLSHandshakeTimeout for a caller's TLS dial.
	if tc, ok := conn.(*tls.Conn); ok {
		return dialer.Handshake(ctx, tc, 0)
	}
	// Go 1.27: any connection that reports a TLS state is handshaken too.
	if cs, ok := conn.(dialer.ConnectionStater); ok && netHTTP127 {
		if err := dialer.HandshakeStater(ctx, conn, cs); err != nil {
			return nil, err
		}
	}
	return conn, nil
}

// tlsStateOf is conn's TLS state, nil when conn is not TLS (for a
// connection to an https proxy forwarding plain http requests too: net/http
// reports it as Response.TLS). Before Go 1.27 only a *tls.Conn is TLS; from
// Go 1.27 on, as for net/http, so is any connection with a ConnectionState
// method.
func tlsStateOf(conn net.Conn) *tls.ConnectionState {
	var cs tls.ConnectionState
	switch c := conn.(type) {
	case *tls.Conn:
		cs = c.ConnectionState()
	case dialer.ConnectionStater:
		if !netHTTP127 {
			return nil
		}
		cs = c.ConnectionState()
	default:
		return nil
	}
	return &cs
}
