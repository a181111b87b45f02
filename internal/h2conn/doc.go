// Package h2conn is ferry's HTTP/2 client connection: it turns a net.Conn
// that already speaks HTTP/2 (TLS with ALPN "h2", or cleartext with prior
// knowledge, "h2c") into a *Conn that the pool can share between requests.
// It is written on two parts of golang.org/x/net/http2 that are stable on
// every toolchain, the Framer (frame reading and writing, with its frame
// size and header list limits) and hpack; x/net's client (http2.Transport,
// ClientConn) is not used. internal/testpeer, imported only by tests, uses
// the same Framer to play hostile servers.
//
// # Layout
//
//   - conn.go: the exported Conn and NewClientConn.
//   - clientconn.go: the connection state and the SETTINGS exchange.
//   - slots.go: the slot contract below (reserve, release, idle, close).
//   - request.go: RoundTrip, from the request to the response.
//   - write.go: the writes (HEADERS, DATA, resets, window updates), under
//     one write lock.
//   - inline.go: a small in-memory request body sent with its HEADERS.
//   - framesize.go: how request bodies are cut into DATA frames.
//   - read.go: the frame reader, one goroutine per connection.
//   - stream.go: a stream's state and its response body.
//   - recvbuf.go: the buffers that hold received body bytes until the
//     caller reads them, reused per connection and from process-wide pools.
//   - flow.go: flow control, both directions.
//   - headers.go: the request and response header rules net/http applies.
//   - goaway.go: the ways a connection or a stream ends, and the errors.
//   - gzip.go: transparent decompression.
//
// # Contract
//
// NewClientConn writes the client preface and SETTINGS and starts the
// connection's frame reader (one goroutine, ended by Close or by the peer
// closing the connection). The returned *Conn implements
// idlepool.SharedConn, idlepool.IdleReporter and idlepool.IdleCloser:
//
//   - ReserveStream claims one request slot. Without strict limits it fails
//     when the connection is at the peer's SETTINGS_MAX_CONCURRENT_STREAMS
//     (counting streams open, reserved, and reset by this side until the
//     server acknowledges the reset), so the caller opens another
//     connection, as net/http does. With Config.StrictMaxConcurrentStreams
//     (or HTTP2Config.StrictMaxConcurrentRequests) it succeeds while the
//     connection is usable and RoundTrip waits for a free stream. Before
//     the server's SETTINGS arrive (100 streams are assumed until then, as
//     net/http does) a second slot is provisional: its RoundTrip waits for
//     them (at most HTTP2Config.PingTimeout, and the request's
//     ResponseHeaderTimeout) and then counts it against the server's real
//     limit, failing with ReasonStreamLimit (nothing sent) if there is no
//     room.
//   - OnStreamFree installs a callback (the pool's StreamReleased for the
//     connection's key) called after each released slot when the
//     connection has room, when the server's SETTINGS open up streams, and
//     when the connection dies; with it set, a second stream is not
//     reserved before the server's SETTINGS arrived (AwaitPeerSettings
//     waits for them).
//   - RoundTrip sends one request in the slot. The slot is released exactly
//     once: when RoundTrip fails, when the response has no body, when the body
//     reaches EOF (before the caller sees EOF) or fails, or when it is closed.
//     A reservation that will not be used is returned with ReleaseStream.
//   - Usable reports false for good once the connection received GOAWAY, was
//     closed (by either side or by a failed PING health check) or failed; a
//     Conn that is no longer usable closes itself when its last slot is
//     released, so a pool may simply forget it.
//   - IdleSince reports when the last slot was released (on Config.Clock);
//     idle expiry is the pool's job.
//
// Errors: a failure for which the server provably did not process the
// request (GOAWAY naming an earlier stream, REFUSED_STREAM, a connection
// that became unusable before the request was sent, or a slot the server's
// limit left no room for when the request was to go out) is returned as a
// *NotProcessedError; IsRetryable reports it. Built with Go 1.26, so is a
// stream the server reset with PROTOCOL_ERROR before the response headers
// (ReasonProtocolReset), because Go 1.26's net/http sends such a request
// again (protocolreset_go126.go); Go 1.27's does not, and neither does
// ferry built with it. Every other error has net/http's text where callers
// test it (context errors keep their identity).
//
// Tracing: RoundTrip fires httptrace GotConn itself, once per call, with
// Reused, WasIdle and IdleTime computed as net/http's HTTP/2 pool does, and
// the per-request hooks: WroteHeaderField, WroteHeaders, Wait100Continue,
// WroteRequest, GotFirstResponseByte, Got100Continue and Got1xxResponse.
// GetConn, DNS, connect and TLS hooks belong to whoever dialled; net/http
// never fires PutIdleConn for HTTP/2, and neither does this package.
//
// # Where this package differs from net/http on purpose
//
// A PROTOCOL_ERROR reset (Go 1.26 builds): net/http 1.26 sends the request
// again with no limit and no pause for as long as each attempt lands on a
// new connection, because its count of HTTP/2 retries starts again on every
// connection (against a loopback server that resets every stream it made
// 55,774 connections in 4 s for one request). This package only reports
// the request as retryable; the caller bounds the retries (ferry's
// transport counts them with its other HTTP/2 retries: at most seven, with
// net/http's waits of 0, 1, 2, 4 ... 32 seconds between them). Which
// requests are retried, and the error of one that cannot be (a body
// without GetBody), are net/http's.
//
// ReplayBody wraps a request body for one attempt so that the connection's
// Close of the body on an error does not close a body the transport may
// send again on another connection (replaybody.go).
package h2conn
