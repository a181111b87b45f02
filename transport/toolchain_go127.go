//go:build go1.27

package transport

// netHTTP127 is true when ferry is built with Go 1.27 or later, whose
// net/http changed behaviours that a drop-in replacement follows (each use
// names the behaviour):
//   - a response body closed before its end is drained in the background
//     and its connection kept when that reaches the end (drain.go);
//   - a CONNECT request's connection is never reused, whatever the status;
//   - a connection from DialTLSContext that is not a *tls.Conn but has a
//     ConnectionState method counts as TLS (ALPN, Response.TLS, handshake
//     hooks).
const netHTTP127 = true
