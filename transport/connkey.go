package transport

import (
	"net"
	"net/url"
	"strings"

	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/proxydial"
	"golang.org/x/net/idna"
)

// connKey names the connections a request may use. It is computed once per
// request.
//
// proxy is the proxy's identity (the zero Key for a direct connection;
// credentials only as a digest). For an http target sent to an HTTP(S)
// proxy in absolute form, addr is the proxy's host:port instead of the
// target's: one connection to the proxy serves every http target, as in
// net/http. h1Only says the request must not share a multiplexed (HTTP/2
// or HTTP/3) connection (protoSet.sharedKey decides): an h1Only key only
// ever gets an HTTP/1.1 connection of its own, and its TLS handshakes do not
// offer h2 (protoSet.alpnFor). Shared HTTP/2 connections are registered with
// idlepool.AddShared under a key with h1Only false and found with
// GetShared before a dial (h2.go, getconn.go).
type connKey struct {
	scheme string // "http" or "https"
	addr   string // host:port, host lower case and punycode
	proxy  proxydial.Key
	h1Only bool
}

// proxied reports whether connections for k go through a proxy.
func (k connKey) proxied() bool { return k.proxy != (proxydial.Key{}) }

// originAddr returns u's "host:port" with the scheme's default port, the
// host in lower-case ASCII (punycode for IDNs). It allocates only when the
// URL's Host is not already in that form.
func originAddr(u *url.URL) (string, error) {
	host := u.Host
	if h1conn.CanonicalHostPort(host) {
		return host, nil
	}
	h, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	if !isASCII(h) {
		a, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return "", err
		}
		h = a
	}
	return net.JoinHostPort(strings.ToLower(h), port), nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
