//go:build !go1.27

package transport

// drainOnEarlyClose is false when ferry is built with Go 1.26: net/http
// there closes the connection of a response body closed before its end,
// and so does ferry (drain.go's code is compiled out).
const drainOnEarlyClose = false
