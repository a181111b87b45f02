//go:build !go1.27

package h2conn

// protocolResetRetriedByToolchain: Go 1.26's net/http retries a request
// whose stream the server reset with PROTOCOL_ERROR (h2_bundle.go,
// http2canRetryError).
const protocolResetRetriedByToolchain = true
