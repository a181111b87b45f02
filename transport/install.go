package transport

import (
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
)

// One-line adoption (Install, InstallDefaultTransport) and the
// http.DefaultTransport type-assertion trap they are designed around; the
// trade-off is documented on Install.

// installed is the Transport the latest Install or InstallDefaultTransport
// put in place, until undone.
var installed atomic.Pointer[Transport]

// stockDefaultTransport is net/http's own DefaultTransport value, taken
// when this package is initialised (before main; net/http is initialised
// before it), to recognise its default dialer.
var stockDefaultTransport, _ = http.DefaultTransport.(*http.Transport)

// netDialerDialContext is the code of a (*net.Dialer).DialContext method
// value: what net/http's DefaultTransport.DialContext holds.
var netDialerDialContext = reflect.ValueOf((&net.Dialer{}).DialContext).Pointer()

// Install makes http.DefaultClient send its requests with a ferry
// Transport and returns the undo function. It is the safe default, and
// what importing github.com/ferryhttp/ferry/install does.
//
// Many programs and libraries do
//
//	t := http.DefaultTransport.(*http.Transport).Clone()
//
// which panics once http.DefaultTransport holds anything but an
// *http.Transport, and no Go type can pass for one. So Install leaves
// http.DefaultTransport alone and sets http.DefaultClient.Transport:
//
//   - through ferry: http.Get, http.Head, http.Post, http.PostForm and
//     http.DefaultClient.Do;
//   - unchanged, still net/http: http.DefaultTransport (its type assertion
//     and Clone keep working), clients with a nil Transport other than
//     http.DefaultClient (&http.Client{Timeout: ...}), and code that uses
//     or clones http.DefaultTransport. Convert those you own with
//     Transport: transport.From(std).
//
// InstallDefaultTransport covers every client with a nil Transport too, at
// the price of that assertion. net/http's Transport.RegisterProtocol is
// not used: it is keyed by URL scheme, "https" is taken by net/http's
// bundled HTTP/2 once the transport is used, and it would leave
// http.DefaultTransport's own pool and fields half in charge.
//
// The ferry Transport is built with From from the transport it displaces
// (http.DefaultClient.Transport if that is an *http.Transport, otherwise
// http.DefaultTransport if that is one, otherwise New's defaults), so a
// program that tuned it keeps its proxy, timeouts, TLS and pool settings.
// net/http's own default dialer is the exception: ferry dials itself
// instead (same 30 s timeout and keep-alive, plus its DNS cache, Happy
// Eyeballs and HTTP/3, which a DialContext would turn off); a DialContext
// the program set is kept.
//
// The undo function restores what was there (unless something else
// replaced ferry since), forgets the Transport for Installed, and closes
// its idle connections; calling it again does nothing. Call Install at the
// start of main or from an init function, before other goroutines send
// requests: like any assignment to these globals, it is not synchronized.
func Install() (undo func()) {
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
// http.DefaultTransport.(*http.Transport) then panics. Use it only in a
// program you know does no such thing (search the module and its
// dependencies for "DefaultTransport.(*http.Transport)"); otherwise use
// Install.
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
// program's, or a net.Dialer on a transport the program made) is kept.
func fromDisplaced(base *http.Transport) *Transport {
	t := From(base)
	if base != nil && base == stockDefaultTransport && base.DialContext != nil &&
		reflect.ValueOf(base.DialContext).Pointer() == netDialerDialContext {
		t.DialContext = nil
	}
	return t
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
