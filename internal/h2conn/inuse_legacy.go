//go:build !(go1.27 && !http2legacy)

package h2conn

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"

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
// hook panics with inUseAbort, which recoverInUseAbort recovers. The marker
// never reaches ClientConn.RoundTrip, so it takes no stream ID (the first
// request goes out on stream 1, as with net/http, and x/net's rules for a
// connection's first stream keep applying), consumes no stream
// reservation, never waits for the new-request lock or a free stream,
// writes nothing and starts no goroutine.
//
// The panic is safe only because of three facts about the x/net that is
// built in:
//
//  1. x/net fires GotConn on the goroutine that called its
//     Transport.RoundTrip (recover sees only its own goroutine's panic; a
//     panic on another goroutine would end the process);
//  2. x/net holds no lock when it fires GotConn (a mutex held across the
//     panic would stay locked, and the connection would hang);
//  3. x/net defers nothing and leaves nothing half done between setting
//     the flag and firing the hook (unwinding would run the one or skip
//     finishing the other).
//
// All three hold in x/net v0.62: roundTripViaPool (transport_common.go)
// sets the flag with a compare-and-swap and calls traceGotConn
// (transport.go) on the caller's goroutine; traceGotConn locks the
// connection's mutex only to compute WasIdle and IdleTime and unlocks it
// before calling the hook; neither function defers anything. go.mod pins
// v0.62.0, but the pin binds only builds of ferry's own module: a
// program's main module may require a newer x/net, and minimal version
// selection then builds ferry with that one, whose code path nobody
// checked. So markInUse marks only when the x/net in the binary, as
// runtime/debug.ReadBuildInfo reports it (read once per process), is a
// release of the checked line (checkedXnetLine; not replaced, or replaced
// by such a release of golang.org/x/net itself). With any other x/net no
// connection is marked: each keeps x/net's five-second timer (a later
// death notice and a pending timer, nothing worse). A binary that carries
// no list of dependencies (cmd/go records none in test binaries, and none
// outside module mode) cannot tell: there kept-alive connections without
// a strict limit are marked (their fallback below is harmless), the others
// are not. So test binaries, ferry's own and its users', mark as a
// program built with go.mod's x/net does, except for those two kinds.
// Widening checkedXnetLine needs the three facts read again in the new
// x/net.
//
// Tests that fail when x/net changes under the facts (run them with the
// new x/net and -tags http2legacy; ferry's tests open the gate, see
// inuse_legacy_test.go): TestMarkInUseTakesNothing (no stream, stream ID
// or reservation taken; a lock left held hangs its next call into x/net),
// TestMarkInUse (the flag is set: the death notice comes at once),
// TestFirstRequestOnStreamOne and TestMarkInUseAfterPeerSettings (the
// marker ends at once); a hook fired on another goroutine crashes the test
// binary. TestPinnedXnetIsChecked fails when go.mod leaves the checked
// line.
//
// Should the hook not fire at all, the marker's "Connection" header makes
// x/net refuse it while encoding, before it writes a frame, but after it
// assigned the marker a stream ID: the fallback spends stream 1
// (TestInUseFallbackWritesNothing).
//
// Every connection is marked, single-use (DisableKeepAlives) and
// strict-limit ones too. Only the fallback could harm those, because it
// reaches ClientConn.RoundTrip: there the marker would take a single-use
// connection's one stream ID, so that x/net refuses every request on it,
// and on a strict-limit connection the server had already declared full
// it would wait for a free stream forever. The fallback runs only if the
// hook does not fire, which on a checked x/net it always does; with an
// unchecked x/net nothing is marked, and when the x/net is unknown these
// two kinds are not. (Before, when the marker reached
// ClientConn.RoundTrip, these connections were not marked and kept x/net's
// timer: a single-use one left a pending timer and a death notice five
// seconds late behind every request.)

// inUseMarker is the Connection header value of markInUse's request: not
// "close" or "keep-alive", so x/net refuses it before writing a frame.
const inUseMarker = "ferry-h2conn-in-use"

// checkedXnetLine is the x/net release line whose pool path was read for
// the three facts above: its releases (v0.62.0, v0.62.1, ...) are marked.
const checkedXnetLine = "v0.62."

// xnetModule is x/net's module path, as the build info names it.
const xnetModule = "golang.org/x/net"

// xnetBuilt is what a binary's build information says of its x/net.
type xnetBuilt int

const (
	xnetUnknown   xnetBuilt = iota // no dependency list (test binaries, GOPATH builds)
	xnetChecked                    // a release on checkedXnetLine
	xnetUnchecked                  // any other x/net
)

// builtXnet is what this binary says of its x/net (read once per process).
// It is a variable so that tests can pretend either answer.
var builtXnet = sync.OnceValue(func() xnetBuilt {
	bi, ok := debug.ReadBuildInfo()
	if !ok || len(bi.Deps) == 0 {
		return xnetUnknown
	}
	return classifyXnet(bi.Deps)
})

// classifyXnet says whether deps (a binary's non-empty dependency list)
// holds a release of golang.org/x/net on checkedXnetLine, unreplaced or
// replaced by such a release of golang.org/x/net itself.
func classifyXnet(deps []*debug.Module) xnetBuilt {
	for _, m := range deps {
		if m.Path != xnetModule {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if m.Path == xnetModule && checkedXnetVersion(m.Version) {
			return xnetChecked
		}
		return xnetUnchecked
	}
	return xnetUnchecked
}

// marksInUse reports whether a connection is marked: always with a checked
// x/net, never with an unchecked one, and, when the x/net is unknown, only
// a kept-alive connection without a strict limit (cautious is false).
func marksInUse(built xnetBuilt, cautious bool) bool {
	switch built {
	case xnetChecked:
		return true
	case xnetUnknown:
		return !cautious
	}
	return false
}

// checkedXnetVersion reports whether v is a release on checkedXnetLine
// (not a pre-release or a pseudo-version, whose code may differ).
func checkedXnetVersion(v string) bool {
	patch, ok := strings.CutPrefix(v, checkedXnetLine)
	if !ok || patch == "" {
		return false
	}
	for _, r := range patch {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

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

// markInUse marks the connection of t2 as used in x/net, as marksInUse
// says (cautious: the connection is single-use or has a strict limit).
func markInUse(t2 *http2.Transport, cautious bool) {
	if !marksInUse(builtXnet(), cautious) {
		return
	}
	defer recoverInUseAbort()
	if resp, err := t2.RoundTrip(newInUseRequest(context.Background())); err == nil {
		resp.Body.Close() // not reached: the hook or the header stops x/net
	}
}
