package transport

import (
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"
)

// One-line adoption (Install, InstallDefaultTransport) and the
// http.DefaultTransport type-assertion trap Install avoids; the routing
// itself is in install_registered.go.

// installed is the Transport the latest Install or InstallDefaultTransport
// put in place, until undone.
var installed atomic.Pointer[Transport]

// stockDefaultTransport is net/http's own DefaultTransport value, taken
// when this package is initialised (before main; net/http is initialised
// before it), to recognise its default dialer.
var stockDefaultTransport, _ = http.DefaultTransport.(*http.Transport)

// stockDialContext is the identity (funcID) of net/http's default dialer,
// stockDefaultTransport's DialContext when this package is initialised:
// a (*net.Dialer).DialContext method value. Another net.Dialer's method
// value, one the program set, has the same code but not this identity.
var stockDialContext = func() unsafe.Pointer {
	if stockDefaultTransport == nil || stockDefaultTransport.DialContext == nil ||
		reflect.ValueOf(stockDefaultTransport.DialContext).Pointer() != reflect.ValueOf((&net.Dialer{}).DialContext).Pointer() {
		return nil
	}
	return funcID(&stockDefaultTransport.DialContext)
}()

// Install makes ferry send the requests of http.DefaultTransport, which
// stays the *http.Transport it was, and returns the undo function. It is
// what importing github.com/ferryhttp/ferry/install does.
//
// It registers ferry with http.DefaultTransport.RegisterProtocol for
// "https" and "http", net/http's own way to hand a transport's requests
// to another RoundTripper. So:
//
//   - through ferry: http.Get, http.Head, http.Post, http.PostForm,
//     http.DefaultClient, every http.Client with a nil Transport
//     (&http.Client{Timeout: ...}), and code calling
//     http.DefaultTransport.RoundTrip;
//   - unchanged: http.DefaultTransport.(*http.Transport) holds, and a
//     Clone of it is a plain net/http transport with the same settings
//     (the caller is about to reconfigure it); a Transport the program
//     set on http.DefaultClient or another client keeps its requests;
//   - http.DefaultTransport.CloseIdleConnections closes ferry's idle
//     connections too (except under GODEBUG=http2client=0, with which
//     net/http does not look for the registration).
//
// The ferry Transport is built with From from http.DefaultTransport's
// settings, except net/http's own default dialer, which ferry replaces
// with its own (same 30 s timeout and keep-alive, plus its DNS cache,
// Happy Eyeballs and HTTP/3, which a DialContext would turn off); a
// DialContext the program set is kept. Both share one TLSClientConfig,
// cloned for every connection, so changes made to it in place apply to
// ferry too, as they would to net/http (except NextProtos, read at the
// first request).
//
// If the program changes a setting of http.DefaultTransport (assigns
// TLSClientConfig, Proxy, DialContext, a timeout, any exported field),
// the next request builds a ferry Transport from the new settings, once
// per change, and it serves the requests from then on; the replaced one's
// idle connections are closed (net/http would keep its pool). Each
// request compares the fields with those the serving Transport was built
// from (about 30 loads and compares, tens of nanoseconds, no allocation):
// values, and the identity of pointers, maps and functions, plus the
// length of maps. An HTTP2Config, or an existing map entry, changed in
// place is not noticed (assign a new one instead). The protocols follow
// net/http's first-use rule: at the first request (or
// CloseIdleConnections call) the protocols are fixed and, with HTTP/2 on,
// "h2" and "http/1.1" are added to TLSClientConfig.NextProtos as net/http
// does; a TLS config assigned before then gets HTTP/2, one assigned after
// offers the NextProtos it has (a clone of the config in use keeps HTTP/2,
// a new config without NextProtos gets HTTP/1.1, as with net/http).
// Stats of the Transport Installed returns cover all the Transports built
// for one Install.
//
// Left to net/http: https WebSocket upgrades, which it never hands to a
// registered protocol (an http:// Upgrade or CONNECT request reaches
// ferry, which sends it over HTTP/1.1 as net/http would). A request with
// a body reaches ferry as net/http's shallow copy (the body wrapped so
// that a declined request can be sent again), and the response's Request
// is that copy.
//
// Call Install before http.DefaultTransport's first request: at the start
// of main or from an init function. A registration lasts for the process;
// the undo function hands http.DefaultTransport's requests to a net/http
// Transport with its settings (a Clone, rebuilt when they change, with
// net/http's own HTTP/2: http.DefaultTransport itself took ferry for its
// HTTP/2 and has none), forgets the Transport for Installed and closes
// its idle connections; calling it again does nothing. Install called
// again installs a new ferry Transport on the same registration.
//
// When the registration is not possible (http.DefaultTransport is not an
// *http.Transport, it was used already, or its "https" is registered by
// someone else), Install sets http.DefaultClient.Transport instead: then
// only http.Get, http.Head, http.Post, http.PostForm and
// http.DefaultClient use ferry. Installed is non-nil in both cases.
//
// InstallDefaultTransport replaces the http.DefaultTransport variable
// itself, which breaks http.DefaultTransport.(*http.Transport); prefer
// Install.
func Install() (undo func()) {
	if std, ok := http.DefaultTransport.(*http.Transport); ok {
		if a, err := adoptionFor(std); err == nil {
			t, unroute := a.install()
			installed.Store(t)
			return undoOnce(t, unroute)
		}
	}
	return installDefaultClient()
}

// installDefaultClient is Install's fallback: it sets
// http.DefaultClient.Transport to a ferry Transport built from the
// transport it displaces (http.DefaultClient.Transport if that is an
// *http.Transport, otherwise http.DefaultTransport if that is one,
// otherwise New's defaults). The undo function restores what was there
// unless something else replaced ferry since.
func installDefaultClient() (undo func()) {
	prev := http.DefaultClient.Transport
	base, ok := prev.(*http.Transport)
	if !ok {
		base, _ = http.DefaultTransport.(*http.Transport)
	}
	t := fromDisplaced(base)
	http.DefaultClient.Transport = t
	installed.Store(t)
	return undoOnce(t, func() {
		if http.DefaultClient.Transport == http.RoundTripper(t) {
			http.DefaultClient.Transport = prev
		}
	})
}

// InstallDefaultTransport sets http.DefaultTransport to a ferry Transport
// built from its settings (as Install does) and returns the undo function.
// Every client with a nil Transport, http.DefaultClient included, then
// uses ferry, and so does code calling http.DefaultTransport.RoundTrip.
//
// Any code, yours or a dependency's, that asserts
// http.DefaultTransport.(*http.Transport) then panics, and code that
// type-switches it silently skips its configuration. Use it only in a
// program you know does no such thing (the ferrycheck command,
// github.com/ferryhttp/ferry/cmd/ferrycheck, lists such places in a module
// and its dependencies); otherwise use Install, which reaches the same
// clients without replacing the variable.
func InstallDefaultTransport() (undo func()) {
	prev := http.DefaultTransport
	base, _ := prev.(*http.Transport)
	t := fromDisplaced(base)
	http.DefaultTransport = t
	installed.Store(t)
	return undoOnce(t, func() {
		if http.DefaultTransport == http.RoundTripper(t) {
			http.DefaultTransport = prev
		}
	})
}

// Installed returns the Transport the latest Install or
// InstallDefaultTransport put in place (for its Stats, say), or nil when
// none is in place (never installed, or undone).
func Installed() *Transport { return installed.Load() }

// fromDisplaced is From(base), except that net/http's default dialer is
// dropped when base is net/http's own DefaultTransport still holding it:
// ferry's dialer has the same 30 s timeout and keep-alive and adds the DNS
// cache, Happy Eyeballs and HTTP/3, all of which a DialContext set on the
// Transport would turn off. Any other DialContext (a function of the
// program's, or a net.Dialer the program set, on this transport or
// another) is kept.
func fromDisplaced(base *http.Transport) *Transport {
	t := From(base)
	dropStockDialer(t, base)
	return t
}

// dropStockDialer clears t's DialContext, copied from base, if it is
// net/http's default dialer on net/http's own DefaultTransport (see
// fromDisplaced).
func dropStockDialer(t *Transport, base *http.Transport) {
	if base != nil && base == stockDefaultTransport && stockDialContext != nil &&
		funcID(&base.DialContext) == stockDialContext {
		t.DialContext = nil
	}
}

// undoOnce returns a function that runs restore once, forgets t as the
// installed Transport and closes its idle connections.
func undoOnce(t *Transport, restore func()) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			restore()
			installed.CompareAndSwap(t, nil)
			t.CloseIdleConnections()
		})
	}
}
