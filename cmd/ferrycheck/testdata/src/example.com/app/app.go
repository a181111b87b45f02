// want package:"19 places need \\*http.Transport"

// Package app asserts http.DefaultTransport and other round trippers to
// *http.Transport in every way ferrycheck knows, and in ways it must not
// report.
package app

import (
	"net/http"

	"example.com/lib" // want `^dependency example.com/lib: example.com/lib/lib.go:10: http.DefaultTransport asserted to \*http.Transport: holds with transport.Install \(safe\); panics after` `^dependency example.com/lib: example.com/lib/lib.go:11: writes field MaxIdleConnsPerHost`
)

func useLib() { lib.Tune() }

func unchecked() {
	t := http.DefaultTransport.(*http.Transport)                      // want `^http.DefaultTransport asserted to \*http.Transport: holds with transport.Install \(safe\); panics after`
	t.MaxIdleConns = 10                                               // want `^writes field MaxIdleConns of the \*http.Transport from the type assertion at app.go:17`
	_ = t.Proxy                                                       // want `^reads field Proxy`
	t.MaxConnsPerHost++                                               // want `^writes field MaxConnsPerHost`
	_ = t.Clone()                                                     // a method, not a field
	http.DefaultTransport.(*http.Transport).ForceAttemptHTTP2 = false // want `^http.DefaultTransport asserted to \*http.Transport: holds with transport.Install \(safe\); panics` `^writes field ForceAttemptHTTP2`
}

func checked(c *http.Client) {
	if t, ok := c.Transport.(*http.Transport); ok { // want `^http.RoundTripper asserted to \*http.Transport: fails when the value is a ferry Transport`
		t.TLSClientConfig = nil // want `^writes field TLSClientConfig`
	}
	_ = c.Transport.(*http.Transport).Proxy // want `^http.RoundTripper asserted to \*http.Transport: fails \(panics: unchecked\) when` `^reads field Proxy`
	var rt http.RoundTripper = http.DefaultTransport
	switch tt := rt.(type) {
	case *http.Transport: // want `^http.RoundTripper asserted to \*http.Transport: fails when`
		tt.DisableKeepAlives = true // want `^writes field DisableKeepAlives`
	case nil:
	}
	switch http.DefaultTransport.(type) {
	case *http.Transport: // want `^http.DefaultTransport asserted to \*http.Transport: holds with transport.Install \(safe\); fails after transport.InstallDefaultTransport, and this code then skips its configuration`
	}
	var ok bool
	var t2 *http.Transport
	t2, ok = http.DefaultTransport.(*http.Transport) // want `^http.DefaultTransport asserted to \*http.Transport: holds with transport.Install \(safe\); fails after`
	if ok {
		_ = t2.IdleConnTimeout // want `^reads field IdleConnTimeout`
	}
}

// transportOf returns the client's *http.Transport, as resty's
// Client.Transport does; its callers' field accesses are reported.
func transportOf(c *http.Client) (*http.Transport, bool) {
	if t, ok := c.Transport.(*http.Transport); ok { // want `^http.RoundTripper asserted`
		return t, true
	}
	return nil, false
}

func useTransportOf(c *http.Client) {
	if t, ok := transportOf(c); ok {
		t.Proxy = nil // want `^writes field Proxy of the \*http.Transport from the type assertion at app.go:50`
	}
}

// Not reported: the value is not an http.RoundTripper, the target is not
// *http.Transport, or the *http.Transport did not come from an assertion.
func unrelated(c *http.Client, v any, own *http.Transport) {
	_, _ = v.(*http.Transport)
	_, _ = c.Transport.(interface{ CloseIdleConnections() })
	own.MaxIdleConns = 1
	switch v.(type) {
	case *http.Transport:
	}
}
