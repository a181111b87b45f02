//go:build go1.27

package transport

// protocolResetRetried: a Go 1.27 build returns a PROTOCOL_ERROR reset, as
// Go 1.27's net/http does.
const protocolResetRetried = false
