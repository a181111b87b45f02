package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// syncBodyLimit is the largest body written inline on the caller's
// goroutine (known to be in memory: writesInline), when the connection's
// socket certainly takes it with the head at once (h1Conn.inlineBound).
// Larger or streaming bodies get a writer goroutine so a server that
// answers early cannot block the write.
const syncBodyLimit = 64 << 10

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
// net/http's rules (see retry.go).
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
	var o outgoing
	if err := t.plan(req, trace, &o); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	if err := o.sendVia(ds.proxy, key.scheme); err != nil {
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
				pc.closeAndRelease()
				closeOutgoing(&o)
				return nil, err
			}
		}
		wasReused := pc.reused
		pc.startRequest(ctx, req, trace)
		resp, err := pc.roundTrip(&o)
		if err == nil {
			t.stats.countRequestOn(protoH1, pc.statShard)
			t.noteAltSvc(key, resp)
			return resp, nil
		}
		if !shouldRetry(wasReused, req, err) {
			if o.body != nil {
				pc.closeReqBody(o.body) // unless the attempt did
			} else {
				closeRequestBody(req)
			}
			return nil, userError(err)
		}
		t.stats.countRetry()
		// The body is rewound before the Proxy func is asked again, as
		// net/http does: when it fails, the rewound body is the one
		// closed (the first was closed by the attempt).
		if o.body != nil {
			pc.closeReqBody(o.body) // unless the attempt did, as net/http
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, gerr
			}
			o.body = body
			o.syncBody = writesInline(&o) // GetBody may return another kind
		}
		if t.Proxy != nil {
			if err := t.reroute(req, &o, &key, &ds); err != nil {
				closeOutgoing(&o)
				return nil, err
			}
		}
	}
}

// userError strips the internal retry classification, returning the
// underlying read or write error as net/http does.
func userError(err error) error {
	if e, ok := err.(nothingWrittenError); ok {
		err = e.error
	}
	if e, ok := err.(readFromServerError); ok {
		err = e.err
	}
	return err
}

func closeOutgoing(o *outgoing) {
	if o.body != nil {
		o.body.Close()
	} else {
		closeRequestBody(o.req)
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

// plan fills o with the request's framing and the transport-added headers.
func (t *Transport) plan(req *http.Request, trace *httptrace.ClientTrace, o *outgoing) error {
	o.req = req
	o.trace = trace
	o.method = req.Method
	if o.method == "" {
		o.method = "GET"
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if plainHostHeader(host) {
		o.host = host
	} else {
		host, err := httpguts.PunycodeHostPort(host)
		if err != nil {
			return err
		}
		if !httpguts.ValidHostHeader(host) {
			host = ""
		}
		o.host = removeZone(host)
	}

	if req.ContentLength != 0 && req.Body == nil {
		return fmt.Errorf("http: Request.ContentLength=%d with nil Body", req.ContentLength)
	}
	n := outgoingLength(req)
	if req.Body != nil && req.Body != http.NoBody {
		o.body = req.Body
	}
	o.contentLength = n
	te := req.TransferEncoding
	if req.Body == nil {
		te = nil // as net/http: no body, no transfer coding
	}
	switch {
	case len(te) > 0 && te[0] == "chunked":
		o.chunked = true
	case n < 0 && len(te) == 0 && o.method != "CONNECT":
		o.chunked = true
	}
	switch {
	case o.chunked, n < 0:
	case n > 0:
		o.sendCL = true
	case o.method == "POST" || o.method == "PUT" || o.method == "PATCH":
		o.sendCL = true
	case len(te) == 1 && te[0] == "identity" && o.method != "GET" && o.method != "HEAD":
		o.sendCL = true
	}
	if !t.DisableCompression && firstValue(req.Header, "Accept-Encoding") == "" &&
		firstValue(req.Header, "Range") == "" && o.method != "HEAD" {
		o.addGzip = true
	}
	o.emptyChunked = o.chunked && o.body == nil
	o.probe = n < 0 && len(te) == 0 && o.body != nil && usuallyLacksBody(o.method)
	o.addClose = t.DisableKeepAlives && !wantsClose(req) && !isUpgradeRequest(req.Header)
	o.expectContinue = req.ProtoAtLeast(1, 1) && req.Body != nil && expectsContinue(req)
	o.syncBody = writesInline(o)
	return nil
}

// writesInline reports whether o's body is written on the caller's
// goroutine before the response is read: no body, or a small one with a
// declared length and GetBody that is known to be in memory (the HTTP/1.1
// connection chosen then sends it to the body writer when its socket's
// send buffer cannot certainly take it: h1Conn.boundInline). Any other
// body, even one with GetBody, may be a stream whose producer waits for
// the response (a bidirectional exchange): net/http writes every body on
// its write goroutine while it reads the response, and so does ferry for
// those (asyncbody.go).
func writesInline(o *outgoing) bool {
	if o.body == nil {
		return true
	}
	n := o.contentLength
	return o.req.GetBody != nil && n > 0 && n <= syncBodyLimit && !o.chunked && isKnownInMemory(o.body)
}

func isUpgradeRequest(h http.Header) bool {
	return firstValue(h, "Upgrade") != "" && httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade")
}

func firstValue(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// removeZone drops an IPv6 zone from a bracketed host (RFC 6874).
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndex(host, "]")
	if i < 0 {
		return host
	}
	j := strings.LastIndex(host[:i], "%")
	if j < 0 {
		return host
	}
	return host[:j] + host[i:]
}

var _ io.Closer = (*h1Body)(nil)
