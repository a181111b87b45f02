// Package proxydial reaches a target through a proxy, with the semantics of
// net/http.Transport (Go 1.26): HTTP and HTTPS proxies (forwarding for http
// targets, CONNECT tunnels for https targets) and SOCKS5 proxies (schemes
// "socks5" and "socks5h", through golang.org/x/net/proxy).
//
// # What the caller (the transport) does with it
//
// Per request the transport asks its Proxy func for a proxy URL (nil means
// direct), then:
//
//   - Pool key: include Key(proxyURL). The key tells apart proxies that
//     differ in scheme, host, port or credentials (as net/http, whose key
//     holds the proxy URL with its user info), but it never holds the
//     password in readable form: credentials are kept as a salted digest.
//     When Forwards(proxyURL, targetScheme) is true, leave the target
//     address out of the key: one connection to the proxy serves any
//     http target (net/http does the same).
//   - Forwards(proxyURL, "http") true (http target, http or https proxy):
//     get a connection with DialProxy, write requests on it with the
//     absolute-form request target (AbsoluteURI), and set the
//     Proxy-Authorization header to AuthHeader(proxyURL) when that is not
//     empty, replacing any value the caller set. All other request headers
//     go to the proxy unchanged, as net/http sends them.
//   - Otherwise (https target through any proxy, or any target through a
//     SOCKS5 proxy): Tunnel returns a connection that reaches the target;
//     the transport speaks to it as if it had dialled the target directly
//     (TLS with ServerName = target host for https targets, origin-form
//     request lines). Nothing proxy-related is added to requests sent
//     through a tunnel, so the proxy's credentials never reach the origin.
//
// The CONNECT request carries Host (the target), the User-Agent net/http
// writes ("Go-http-client/1.1"), Config.ProxyConnectHeader (or the result of
// Config.GetProxyConnectHeader, which then replaces it) and
// Proxy-Authorization from the proxy URL's user info.
//
// # Where it differs from net/http, on purpose
//
//   - An empty proxy scheme is treated as "http" with port 80 (net/http
//     documents "http is assumed" but would dial "host:" with no port); any
//     scheme other than http, https, socks5, socks5h is an error instead of
//     being treated as a plain HTTP proxy.
//   - TLS to an HTTPS proxy offers no ALPN protocols: only HTTP/1.1 is
//     spoken to proxies (net/http offers the target's NextProtos, h2 included,
//     and would break if a proxy picked h2 for a CONNECT).
//   - The SOCKS5 handshake is bounded by Config.ConnectTimeout like CONNECT
//     (net/http bounds only CONNECT), so a silent proxy cannot hang a dial
//     whose context has no deadline.
//   - Bytes the proxy sent after its CONNECT response are kept and read
//     first from the returned connection (net/http discards them, which is
//     harmless only because TLS servers do not speak first).
//   - Key canonicalises the proxy URL (lower-case scheme and host, default
//     port), so "http://p" and "http://p:80" share connections.
//
// # SOCKS5 name resolution
//
// net/http 1.26 passes the target host name to the proxy for both "socks5"
// and "socks5h" (the proxy resolves). This package does the same by default.
// If Config.LookupSOCKS5 is set, a "socks5" (not "socks5h") proxy is given
// an address resolved locally through it instead, as curl does.
//
// # Proxy from the environment
//
// http.ProxyFromEnvironment reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY once
// per process and caches the result; a drop-in transport should use it
// as-is (same function, same cache, same localhost/loopback exception).
// FromEnvironment is the uncached equivalent (golang.org/x/net/http/httpproxy,
// the same code net/http uses) for callers that need the environment read
// now, such as tests.
//
// # Errors
//
// Failing to reach the proxy (dial or TLS) returns a *net.OpError with Op
// "proxyconnect", as net/http does; its message names the proxy host:port.
// A CONNECT answered with a status other than 200 is a *StatusError. A
// malformed or truncated CONNECT reply, a SOCKS failure and a cancelled or
// timed-out handshake are wrapped errors whose chains keep the cause
// (context.DeadlineExceeded, io.ErrUnexpectedEOF, ...); these report
// Timeout() as their cause does, so a caller testing *url.Error.Timeout
// sees a timeout where net/http returns one unwrapped. The wrapped error of
// a CONNECT header or response callback, and of a failed dial of the proxy
// (Config.Dial's), reports Timeout() as that error itself does (net/http
// returns it as is, or in a net.OpError that looks one level down: a
// timeout it wraps is none to url.Error.Timeout). No error string ever
// contains the proxy's user name or password.
package proxydial
