package proxydial

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrNoProxyHost is returned (wrapped) for a proxy URL without a host.
var ErrNoProxyHost = errors.New("proxydial: proxy URL has no host")

// UnsupportedSchemeError reports a proxy URL whose scheme is none of http,
// https, socks5, socks5h (or empty, which means http).
type UnsupportedSchemeError struct {
	// Scheme is the scheme as given.
	Scheme string
}

func (e *UnsupportedSchemeError) Error() string {
	return fmt.Sprintf("proxydial: unsupported proxy scheme %q (want http, https, socks5 or socks5h)", e.Scheme)
}

// scheme returns the proxy URL's scheme in lower case, "" read as "http",
// or an *UnsupportedSchemeError.
func scheme(proxyURL *url.URL) (string, error) {
	s := strings.ToLower(proxyURL.Scheme)
	switch s {
	case "":
		return "http", nil
	case "http", "https", "socks5", "socks5h":
		return s, nil
	}
	return "", &UnsupportedSchemeError{Scheme: proxyURL.Scheme}
}

func defaultPort(scheme string) string {
	switch scheme {
	case "https":
		return "443"
	case "socks5", "socks5h":
		return "1080"
	}
	return "80"
}

// Addr returns the host:port to dial to reach the proxy: the URL's host
// (IPv6 literals keep their brackets through net.JoinHostPort) and its
// port, or the scheme's default port (80 for http, 443 for https, 1080 for
// socks5 and socks5h). It never includes credentials. The error is an
// *UnsupportedSchemeError or wraps ErrNoProxyHost.
func Addr(proxyURL *url.URL) (string, error) {
	if proxyURL == nil {
		return "", fmt.Errorf("%w (nil URL)", ErrNoProxyHost)
	}
	s, err := scheme(proxyURL)
	if err != nil {
		return "", err
	}
	host := proxyURL.Hostname()
	if host == "" {
		return "", ErrNoProxyHost
	}
	port := proxyURL.Port()
	if port == "" {
		port = defaultPort(s)
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

// Forwards reports whether a request for a target with targetScheme
// ("http" or "https") is sent to the proxy itself, in absolute form, rather
// than through a tunnel: true for http targets through http or https
// proxies. A nil or invalid proxyURL reports false.
func Forwards(proxyURL *url.URL, targetScheme string) bool {
	if proxyURL == nil || targetScheme != "http" {
		return false
	}
	s, err := scheme(proxyURL)
	return err == nil && (s == "http" || s == "https")
}

// AuthHeader returns the Proxy-Authorization value for the proxy URL's user
// info ("Basic " + base64(user:password)), or "" when the URL has none. As in
// net/http, a user name without a password is sent with an empty password.
func AuthHeader(proxyURL *url.URL) string {
	if proxyURL == nil || proxyURL.User == nil {
		return ""
	}
	password, _ := proxyURL.User.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyURL.User.Username()+":"+password))
}

// Key identifies a proxy for connection pooling. It is comparable (use it in
// a map key) and the zero Key means "no proxy". Two proxy URLs give equal
// keys when they have the same scheme, host, port and user info after
// canonicalisation; different credentials give different keys, so
// connections authenticated with one never serve another. The user info is
// held only as a digest salted per process, so printing a Key (or a struct
// holding it, with any verb) never shows the password.
type Key struct {
	addr   string // scheme://host:port, no credentials
	digest [16]byte
}

// keySalt makes credential digests useless outside this process.
var keySalt = func() [32]byte {
	var s [32]byte
	_, _ = rand.Read(s[:]) // crypto/rand.Read never fails (Go 1.24+)
	return s
}()

// KeyOf returns the pool key for proxyURL; nil gives the zero Key. An
// invalid URL (see Addr) returns its error.
func KeyOf(proxyURL *url.URL) (Key, error) {
	if proxyURL == nil {
		return Key{}, nil
	}
	addr, err := Addr(proxyURL)
	if err != nil {
		return Key{}, err
	}
	s, _ := scheme(proxyURL) // valid: Addr checked it
	k := Key{addr: s + "://" + addr}
	if proxyURL.User != nil {
		h := sha256.New()
		h.Write(keySalt[:])
		h.Write([]byte(proxyURL.User.String()))
		copy(k.digest[:], h.Sum(nil))
	}
	return k, nil
}

// String returns the proxy as scheme://host:port, with "(credentials
// <digest prefix>)" when it has user info; "" for the zero Key.
func (k Key) String() string {
	if k.digest == ([16]byte{}) {
		return k.addr
	}
	return k.addr + " (credentials " + hex.EncodeToString(k.digest[:4]) + ")"
}

// GoString is String, so that %#v does not print fields.
func (k Key) GoString() string { return "proxydial.Key(" + k.String() + ")" }

// AbsoluteURI returns the request target a client writes when it sends the
// request for u to a forwarding proxy: scheme "://" host followed by the
// origin-form target, where host is the Host header value the request is
// sent with (net/http uses Request.Host when set, else URL.Host). A URL
// with an Opaque part or without a scheme is written as net/http writes it:
// u.RequestURI() unchanged.
func AbsoluteURI(u *url.URL, host string) string {
	if u.Scheme == "" || u.Opaque != "" {
		return u.RequestURI()
	}
	return u.Scheme + "://" + host + u.RequestURI()
}
