// Package transport provides Transport, an http.RoundTripper that is a
// drop-in replacement for net/http.Transport: the same exported fields with
// the same names, types, defaults and meaning, and the same observable
// behaviour (request validation, keep-alive, retries, transparent gzip, 1xx
// handling, protocol switches, framing, limits, cancellation, TLS and
// httptrace hooks), at a lower cost per request.
//
// Contract:
//
//   - RoundTrip never modifies the caller's request, always closes req.Body
//     (also on error), sets resp.Request to the caller's request and returns
//     a nil error whenever it obtained a response.
//   - HTTP/1.1 requests are written and response heads read on the caller's
//     goroutine; a request body that is not known to be in memory is written
//     by one goroutine for that request only, so a server may answer before
//     it has read the whole body.
//   - A response body read to EOF hands its connection back to the pool
//     before the caller sees io.EOF; a body closed early closes the
//     connection.
//   - Idle connections are not watched by a goroutine each. A connection the
//     server closed while idle is found when it is reused: replayable
//     requests are retried under net/http's rules, and a request that could
//     not be replayed is sent on an idle connection only after a
//     non-blocking liveness check.
//   - Errors keep their identity: context.Canceled, context.DeadlineExceeded
//     and net.Error with Timeout() == true can be tested with errors.Is and
//     errors.As.
//
// Where ferry differs from net/http on purpose (documented on the fields):
// New leaves DialContext nil because ferry dials itself, resolving names
// through a DNS cache (Resolver, DNSCacheTTL); a TLS ClientSessionCache is
// used when TLSClientConfig has none. Setting DialContext hands dialing and
// name resolution to the caller exactly as in net/http.
//
// Not yet implemented (later issues): HTTP/2 (every https connection
// negotiates ALPN "http/1.1" only), proxies (a non-nil proxy URL returns
// ErrProxyNotSupported) and HTTP/3.
package transport
