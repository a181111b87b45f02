//go:build go1.27

package h2conn

// protocolResetRetriedByToolchain: Go 1.27's net/http no longer retries a
// request whose stream the server reset with PROTOCOL_ERROR.
const protocolResetRetriedByToolchain = false
