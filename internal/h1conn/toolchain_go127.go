//go:build go1.27

package h1conn

// netHTTP127 is true when ferry is built with Go 1.27 or later, whose
// net/http changed behaviours that a drop-in replacement follows (each use
// names the behaviour):
//   - a response body closed before its end is drained in the background
//     and its connection kept when that reaches the end (drain.go);
//   - a CONNECT request's connection is never reused, whatever the status.
const netHTTP127 = true
