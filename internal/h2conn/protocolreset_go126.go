//go:build !go1.27

package h2conn

// retriesProtocolReset: built with Go 1.26, whose net/http sends a request
// again when the server reset its stream with PROTOCOL_ERROR before the
// response headers (h2_bundle.go, http2canRetryError, golang/go#47635): a
// reset received from the peer, for any method, when the body is absent,
// http.NoBody or can be rewound with GetBody (otherwise net/http reports
// "cannot retry ... define Request.GetBody"). Go 1.27's net/http has no
// such rule (golang/go#77843): the rule follows the toolchain, so that
// ferry does what net/http does in the same build. The connection takes no
// new stream after such a reset, so the request goes out again on another
// connection. How often it
// is retried is the caller's rule (doc.go says where ferry differs).
const retriesProtocolReset = true
