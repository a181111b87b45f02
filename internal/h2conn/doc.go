// Package h2conn is ferry's single boundary around golang.org/x/net/http2:
// it turns a net.Conn that already speaks HTTP/2 (TLS with ALPN "h2", or
// cleartext with prior knowledge, "h2c") into a *Conn that the pool can share
// between requests. Nothing else in ferry imports x/net/http2 as a client
// (internal/testpeer, imported only by tests, uses its Framer to write raw
// frames).
//
// # Contract
//
// NewClientConn writes the client preface and SETTINGS and starts the
// connection's frame reader (one goroutine owned by x/net, ended by Close or
// by the peer closing the connection). The returned *Conn implements
// idlepool.SharedConn, idlepool.IdleReporter and idlepool.IdleCloser:
//
//   - ReserveStream claims one request slot. Without strict limits it fails
//     when the connection is at the peer's SETTINGS_MAX_CONCURRENT_STREAMS
//     (counting x/net's active, reserved and reset-but-unacknowledged
//     streams), so the caller opens another connection, as net/http does.
//     With Config.StrictMaxConcurrentStreams (or
//     HTTP2Config.StrictMaxConcurrentRequests) it succeeds while the
//     connection is usable and RoundTrip waits for a free stream. Before
//     the server's SETTINGS are known to have arrived (x/net assumes 100
//     streams until then) a second slot is provisional: its RoundTrip waits
//     for them (the ack of a PING probe or another request's response,
//     at most HTTP2Config.PingTimeout) and then counts it against the
//     server's real limit, failing with ReasonStreamLimit (nothing sent) if
//     there is no room.
//   - OnStreamFree installs a callback (the pool's StreamReleased for the
//     connection's key) called after each released slot once x/net agrees a
//     stream is free, and when the connection dies; with it set, a second
//     stream is not reserved before the server's SETTINGS arrived (known
//     from the ack of one PING sent when the hook is set, or from a
//     response: ClientConnState cannot tell in wrapped mode).
//   - RoundTrip sends one request in the slot. The slot is released exactly
//     once: when RoundTrip fails, when the response has no body, when the body
//     reaches EOF (before the caller sees EOF) or fails, or when it is closed.
//     A reservation that will not be used is returned with ReleaseStream.
//   - Usable reports false for good once the connection received GOAWAY, was
//     closed (by either side or by a failed PING health check) or failed; a
//     Conn that is no longer usable closes itself when its last slot is
//     released (or, when it died during a ReserveStream, refused), so a
//     pool may simply forget it.
//   - IdleSince reports when the last slot was released (on Config.Clock);
//     idle expiry is the pool's job (IdleConnTimeout is not handed to x/net).
//
// Errors: a failure for which the server provably did not process the
// request (GOAWAY naming an earlier stream, REFUSED_STREAM, a connection
// that became unusable before the request was sent, or a slot the server's
// limit left no room for when the request was to go out) is returned as a
// *NotProcessedError; IsRetryable reports it. Built with Go 1.26, so is a
// stream the server reset with PROTOCOL_ERROR before the response headers
// (ReasonProtocolReset), because Go 1.26's net/http sends such a request
// again (protocolreset_go126.go); Go 1.27's does not, and neither does
// ferry built with it. Only the connection's own failure costs the
// connection: when legacy x/net refuses a reserved stream of a live
// connection because it is momentarily full (a stream reset by a cancelled
// request counts until the server acknowledges the reset), the error is
// ReasonStreamLimit and the connection stays usable. (net/http 1.26 keeps
// such a connection in its pool but does not wait for it: a request that
// finds its HTTP/2 connection full gives the connection's MaxConnsPerHost
// slot back and dials another; ferry's pool makes the request wait for a
// stream instead.) The judgement never waits for
// x/net's write lock (judge.go). A connection that stays full with none of
// its requests in use is pinged when a request finds it so, and given up
// when the PING goes unanswered for HTTP2Config.PingTimeout. Every other
// error is returned exactly as x/net produced it (context errors keep
// their identity).
//
// Tracing: RoundTrip fires httptrace GotConn itself, once per call, with
// Reused, WasIdle and IdleTime computed as net/http's HTTP/2 pool does. x/net
// fires the per-request hooks from the request context itself:
// WroteHeaderField, WroteHeaders, Wait100Continue, WroteRequest,
// GotFirstResponseByte, Got100Continue and Got1xxResponse. GetConn, DNS,
// connect and TLS hooks belong to whoever dialled; net/http never fires
// PutIdleConn for HTTP/2, and neither does this package.
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
// net/http's waits of 0, 1, 2, 4 ... 32 seconds between them). Which requests are retried,
// and the error of one that cannot be (a body without GetBody), are
// net/http's.
//
// # Known gap: a released reservation can spend stream 1
//
// ReleaseStream gives an x/net stream reservation back with a RoundTrip
// whose context is already cancelled (x/net has no call for it; see
// releaseXnetReservation). x/net then selects between taking its
// new-request lock and the cancelled context with both ready, so about
// half the time it takes the lock and assigns the next stream ID before it
// looks at the context again: nothing is written, but the ID is spent. On
// a connection that has sent no request yet that ID is 1, and the
// connection's first real request then goes out on stream 3 and misses
// x/net's first-stream rules (a GOAWAY with an error code answering it is
// taken for a graceful one and the request is retried on a new
// connection, where net/http fails it). Measured with a release that ended
// before the next request: stream 1 in 109 of 200 runs and stream 3 in 91,
// then stream 1 in 101 and stream 3 in 99 (go1.26.8); a
// request that follows at once usually wins the race and gets stream 1.
// Ferry's transport releases a reservation so when the request a
// connection was dialled for is cancelled during the dial and the new
// connection stays in the pool (transport/getconn.go). No deterministic
// release was found: the in-use marker's GotConn path stops before
// ClientConn.RoundTrip, the only place where x/net returns a reservation
// of ours; and keeping the orphaned reservation for the next ReserveStream
// would leave x/net counting as taken a slot that ferry counts as free,
// which every room check (ReserveStream, Usable, the OnStreamFree watcher,
// judge.go) would then have to allow for: with a server limit of one
// stream, one check that did not would leave waiting requests without a
// stream.
//
// # Why x/net/http2, and how to swap it
//
// In Go 1.26 net/http offers http.ClientConn, but only on connections that
// net/http dials itself (Transport.NewClientConn takes an address); ferry
// dials, resolves, applies socket options and negotiates ALPN itself, so it
// needs an HTTP/2 client that accepts an existing net.Conn. x/net's
// Transport.NewClientConn is that API. It is marked deprecated in favour of
// http.ClientConn, and its implementation depends on the Go version:
//
//   - Go 1.26 (or any build with the http2legacy tag): x/net runs its own
//     HTTP/2 client ("legacy" mode).
//   - Go 1.27 and later: x/net wraps net/http's own HTTP/2 client, handing
//     it the net.Conn through a context value ("wrapped" mode). Wrapped
//     connections always wait for a free stream when full, and x/net hears
//     of GOAWAY only when the connection closes.
//
// This package relies only on what both modes share: ReserveNewRequest and
// CanTakeNewRequest (which take no write lock), RoundTrip, Close, Shutdown,
// Ping, State (only where x/net refused a stream, and in legacy mode, where
// it takes the write lock, only on judge.go's checker goroutine, never on a
// request's), the MarkDead call of a
// ClientConnPool (watch.go), and the error texts in errors.go. Two pairs of
// files are split by mode: inuse_legacy.go marks each connection as used
// through x/net's pool path (legacy x/net
// otherwise delays MarkDead with a pending five-second timer), stopping
// x/net before the marker takes a stream ID or a reservation, so the first
// request goes out on stream 1 as with net/http; it does so only when the
// x/net built in is a v0.62.x release, the line whose pool path was checked
// (a program's main module may select a newer x/net; then nothing is
// marked); inuse_wrapped.go does nothing. fullrefusal_legacy.go and fullrefusal_wrapped.go say whether
// x/net's "client conn not usable" may mean a live connection that is only
// full, and whether State takes the write lock (legacy only, both). One pair is split by toolchain, as net/http's
// behaviour is: protocolreset_go126.go and protocolreset_go127.go say
// whether a PROTOCOL_ERROR reset is retryable. The tests pass on go1.26.8
// and go1.27.3, and with the http2legacy tag.
//
// To swap to net/http's ClientConn once it accepts a net.Conn, replace the
// x/net calls in conn.go and roundtrip.go (NewClientConn, ReserveNewRequest,
// RoundTrip, Close, Shutdown, Ping, State) with http.ClientConn's Reserve,
// Release, RoundTrip, Close, Available/InFlight and SetStateHook (which can
// replace the MarkDead hook in watch.go); the exported API of this package
// does not change.
//
// # Ferry's own connection (Config.Own)
//
// Config.Own selects a second implementation of the same contract that
// uses only x/net's Framer and hpack (clientconn.go, slots.go, request.go,
// write.go, read.go, stream.go, flow.go, headers.go, goaway.go), one code
// path on Go 1.26 and 1.27. It reads the server's SETTINGS itself, so a
// slot counts against the streams really open and no PING probe, judge or
// in-use marker is needed; until the first SETTINGS arrive a second slot
// is provisional (no hook) or refused (hook), as above, and the hook is
// called once per stream they open up. It is not the default yet: the
// tests that look inside x/net (its State, reservations, the probe) have
// still to be rewritten to test behaviour. FERRY_H2_OWN=1 runs this
// package's and the transport's tests on it.
//
// ReplayBody wraps a request body for one attempt so that x/net's Close on
// an error does not close a body the transport may send again on another
// connection (replaybody.go).
package h2conn
