package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"net/netip"

	"github.com/ferryhttp/ferry/internal/h1conn"
)

// dialState is what one RoundTrip remembers across retries: the resolved
// addresses (DNS runs at most once per request).
type dialState struct {
	addrs    []netip.Addr
	resolved bool
	stale    bool        // addrs is a stale answer no dial has failed on yet (dialItself)
	proxy    *proxyRoute // nil: direct
	// leftPool: a connection was looked for other than by taking a pooled
	// HTTP/2 connection at getConn's first look (net/http's registered
	// HTTP/2 round tripper takes only requests that find one so).
	leftPool bool
}

// RoundTrip implements http.RoundTripper for HTTP/1.1 and HTTP/2 over TCP
// and TLS (HTTP/3 when an origin advertises it). It
// validates req as net/http does, never modifies it, always closes
// req.Body, and retries a request that failed on a reused connection under
// net/http's rules (h1conn.Retryable).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	if err := validateRequest(req); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	key, err := t.connKeyFor(req)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	var ds dialState
	if t.Proxy != nil {
		if err := t.routeViaProxy(req, &key, &ds); err != nil {
			closeRequestBody(req)
			return nil, err
		}
	}
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	var o h1conn.Outgoing
	if err := h1conn.Plan(req, trace, t.DisableCompression, t.DisableKeepAlives, &o); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	if err := sendVia(&o, ds.proxy, key.scheme); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	// Socket options are checked before any connection is taken, so a bad
	// value fails alike over HTTP/1.1, HTTP/2 and HTTP/3 (which does not
	// apply them: see WithSocketOptions).
	opts := socketOptionsFrom(ctx)
	if len(opts) > 0 {
		if err := validateSocketOptions(opts); err != nil {
			closeRequestBody(req)
			return nil, err
		}
	}
	if resp, err, handled := t.roundTripH3(req, &o, key); handled {
		return resp, err
	}
	var shared sharedAttempts // attempts over HTTP/2 connections (roundTripShared)
	for {
		if ctx.Err() != nil {
			closeOutgoing(&o)
			return nil, context.Cause(ctx)
		}
		pc, sc, err := t.getConn(ctx, &o, key, &ds)
		if err != nil {
			closeOutgoing(&o)
			return nil, err
		}
		if sc != nil {
			if len(opts) > 0 {
				retry, err := t.applySharedOptions(key, sc, opts, &shared)
				if retry {
					continue
				}
				if err != nil {
					closeOutgoing(&o)
					return nil, err
				}
			}
			shared.pooledH2 = !ds.leftPool && key.scheme == "https"
			resp, err := t.roundTripShared(ctx, req, &o, key, sc, &shared)
			if err == errRetryShared {
				t.stats.countRetry()
				continue
			}
			if err == nil {
				t.stats.countResponse(resp)
				t.noteAltSvc(key, resp)
			}
			return resp, err
		}
		if len(opts) > 0 {
			if err := pc.sock.apply(opts); err != nil {
				pc.CloseAndRelease()
				closeOutgoing(&o)
				return nil, err
			}
		}
		wasReused := pc.Reused()
		pc.StartRequest(ctx, req, trace)
		resp, err := pc.RoundTrip(&o)
		if err == nil {
			t.stats.countRequestOn(protoH1, pc.statShard)
			t.noteAltSvc(key, resp)
			return resp, nil
		}
		if !h1conn.Retryable(wasReused, req, err) {
			if o.Body != nil {
				pc.CloseReqBody(o.Body) // unless the attempt did
			} else {
				closeRequestBody(req)
			}
			return nil, h1conn.UserError(err)
		}
		t.stats.countRetry()
		// The body is rewound before the Proxy func is asked again, as
		// net/http does: when it fails, the rewound body is the one
		// closed (the first was closed by the attempt).
		if o.Body != nil {
			pc.CloseReqBody(o.Body) // unless the attempt did, as net/http
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, gerr
			}
			o.Body = body
			o.SyncBody = h1conn.WritesInline(&o) // GetBody may return another kind
		}
		if t.Proxy != nil {
			if err := t.reroute(req, &o, &key, &ds); err != nil {
				closeOutgoing(&o)
				return nil, err
			}
		}
	}
}

func closeOutgoing(o *h1conn.Outgoing) {
	if o.Body != nil {
		o.Body.Close()
	} else {
		closeRequestBody(o.Req)
	}
}

// connKeyFor computes the connection key for a direct connection;
// routeViaProxy then adds the proxy, if any.
func (t *Transport) connKeyFor(req *http.Request) (connKey, error) {
	if p := t.Protocols; p != nil && !p.HTTP1() && !p.UnencryptedHTTP2() && !p.HTTP2() {
		return connKey{}, errors.New("ferry/transport: Protocols allows no protocol")
	}
	addr, err := t.originAddrs.addr(req.URL)
	if err != nil {
		return connKey{}, err
	}
	return connKey{scheme: req.URL.Scheme, addr: addr, h1Only: !t.h2.protos.sharedKey(req.URL.Scheme, req)}, nil
}
