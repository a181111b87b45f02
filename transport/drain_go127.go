//go:build go1.27

package transport

// drainOnEarlyClose is true when ferry is built with Go 1.27 or later:
// net/http there drains a response body closed before its end and keeps
// the connection when that reaches the end, so ferry does the same
// (drain.go).
const drainOnEarlyClose = true
