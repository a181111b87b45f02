//go:build !(go1.27 && !http2legacy)

package h2conn

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"net/url"

	"golang.org/x/net/http2"
)

// Telling legacy x/net (Go 1.26, or the http2legacy tag) that a connection
// is in use.
//
// x/net counts a connection as used only when a request reaches it through
// its own connection pool (Transport.RoundTrip sets the connection's
// "reused" flag). This package calls ClientConn.RoundTrip directly, so x/net
// takes every connection of ours for one that never carried a request.
// When such a connection closes within five seconds of its last activity,
// x/net's reader arms a five-second time.AfterFunc and calls MarkDead only
// when it fires, keeping an unused connection in its pool a while. Ferry
// has no x/net pool: the timer only delays the death notice (watch.go) and
// keeps a timer pending in the process. While any timer is pending, a Go
// scheduler thread that goes idle while another waits in the network poller
// interrupts that poller (an eventfd write and read), which in a serial
// HTTP/2 benchmark cost ferry about 0.3 to 0.4 extra wake-ups per request
// for five seconds after each connection closed (issue #7).
//
// markInUse sets the flag through x/net's pool path once, when the
// connection is created, and stops x/net right after it: the watch hands
// the connection to a marker request (deathWatch.GetClientConn), x/net
// sets the flag and fires the request's httptrace GotConn hook, and the
// hook panics with inUseAbort, which markInUse recovers. Between the flag
// and the hook x/net holds no lock and defers nothing, so the marker
// leaves no trace: it never reaches ClientConn.RoundTrip, so it takes no
// stream ID (the first request goes out on stream 1, as with net/http, and
// x/net's rules for a connection's first stream keep applying), consumes no
// stream reservation, never waits for the new-request lock or a free
// stream, writes nothing and starts no goroutine. Should a later x/net skip
// the hook, the marker's "Connection" header makes x/net refuse it before
// encoding anything (it would then spend one stream ID; the stream-1 test
// in inuse_legacy_test.go catches that).
//
// Single-use connections (DisableKeepAlives) and connections with strict
// limits are not marked: so it was when the marker reached RoundTrip (where
// x/net counted it as a single-use connection's one request, and a strict
// connection could make it wait), and they keep x/net's timer.

// inUseMarker is the Connection header value of markInUse's request: not
// "close" or "keep-alive", so x/net refuses it before encoding.
const inUseMarker = "ferry-h2conn-in-use"

// inUseAbort is the panic value with which the marker's GotConn hook stops
// x/net once the connection is counted as used.
type inUseAbort struct{}

// newInUseRequest builds the marker request on ctx, with an httptrace
// GotConn hook that panics with inUseAbort. x/net fires GotConn in its pool
// path right after setting the "reused" flag, before ClientConn.RoundTrip.
// The "Connection" header is the fallback should the hook not fire: x/net
// refuses the request before encoding or writing anything (after assigning
// it a stream ID, so the fallback spends one).
func newInUseRequest(ctx context.Context) *http.Request {
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { panic(inUseAbort{}) },
	}
	return (&http.Request{
		Method: http.MethodGet,
		URL:    &url.URL{Scheme: "https", Host: "in-use.invalid", Path: "/"},
		Header: http.Header{"Connection": {inUseMarker}},
		Host:   "in-use.invalid",
	}).WithContext(httptrace.WithClientTrace(ctx, trace))
}

// recoverInUseAbort, deferred by markInUse, swallows the marker's own
// panic (inUseAbort) and lets every other panic go on unchanged: a panic
// from x/net or from anything else is not ours to hide.
func recoverInUseAbort() {
	if r := recover(); r != nil {
		if _, ok := r.(inUseAbort); !ok {
			panic(r)
		}
	}
}

func markInUse(t2 *http2.Transport) {
	if t2.StrictMaxConcurrentStreams {
		return
	}
	defer recoverInUseAbort()
	if resp, err := t2.RoundTrip(newInUseRequest(context.Background())); err == nil {
		resp.Body.Close() // not reached: the hook or the header stops x/net
	}
}
