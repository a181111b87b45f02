package proxydial

import (
	"net/url"

	"golang.org/x/net/http/httpproxy"
)

// FromEnvironment reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY (or their
// lower-case forms) now and returns the proxy selector net/http would build from them, with
// the same rules: requests to "localhost" and loopback addresses are never
// proxied, NO_PROXY patterns match as documented by httpproxy.Config, and a
// proxy value without a scheme means http. The returned func returns
// (nil, nil) for "no proxy" (an unparsable proxy setting is ignored, so it
// also means no proxy) and an error when HTTP_PROXY would apply to the
// request and REQUEST_METHOD is set (a CGI environment, where HTTP_PROXY
// may come from a client's "Proxy:" header).
//
// Unlike http.ProxyFromEnvironment, which reads the environment once per
// process and caches it, every call reads it again. A drop-in transport
// should default to http.ProxyFromEnvironment itself, to share its cache
// and behaviour exactly.
func FromEnvironment() func(*url.URL) (*url.URL, error) {
	return httpproxy.FromEnvironment().ProxyFunc()
}
