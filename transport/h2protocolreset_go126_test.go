//go:build !go1.27

package transport

// protocolResetRetried: a Go 1.26 build retries a PROTOCOL_ERROR reset, as
// Go 1.26's net/http does.
const protocolResetRetried = true
