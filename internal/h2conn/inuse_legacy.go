//go:build !(go1.27 && !http2legacy)

package h2conn

import (
	"net/http"
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
// connection is created: the watch hands the connection to a request whose
// "Connection" header x/net rejects before it encodes anything. That
// request fails synchronously inside x/net; it writes nothing to the peer
// and holds no reservation afterwards (there is none yet to consume), but
// it does use up one stream ID, so the first real request goes out on
// stream 3. Single-use connections (DisableKeepAlives) are not marked: x/net
// would count the marker as their one request and close them.
//
// x/net's reader runs while the marker goes out, so it may already have
// processed SETTINGS allowing no stream (or a GOAWAY). The marker must then
// still end at once: x/net's retry of an "unusable" connection finds no
// connection the second time (deathWatch.GetClientConn), and connections
// with strict limits are not marked, since x/net would make the marker wait
// for a free stream (with no context to end the wait); they keep x/net's
// timer.
// inUseMarker is the Connection header value of markInUse's request: not
// "close" or "keep-alive", so x/net refuses it.
const inUseMarker = "ferry-h2conn-in-use"

func markInUse(t2 *http2.Transport) {
	if t2.StrictMaxConcurrentStreams {
		return
	}
	req := &http.Request{
		Method: http.MethodGet,
		URL:    &url.URL{Scheme: "https", Host: "in-use.invalid", Path: "/"},
		Header: http.Header{"Connection": {inUseMarker}},
		Host:   "in-use.invalid",
	}
	if resp, err := t2.RoundTrip(req); err == nil {
		resp.Body.Close() // not reached: x/net rejects the header
	}
}
