//go:build go1.27

package h2conn

// retriesProtocolReset is false with Go 1.27 and later, whose net/http no
// longer sends a request again after a PROTOCOL_ERROR reset (see
// protocolreset_go126.go); the stream error is returned unchanged.
const retriesProtocolReset = false
