//go:build go1.27

package transport

// netHTTP127 is true when ferry is built with Go 1.27 or later, whose
// net/http changed behaviours that a drop-in replacement follows: here, a
// connection from DialTLSContext that is not a *tls.Conn but has a
// ConnectionState method counts as TLS (ALPN, Response.TLS, handshake
// hooks). The HTTP/1.1 connection's own switches (draining a body closed
// early, never reusing a CONNECT request's connection) are in
// internal/h1conn.
const netHTTP127 = true
