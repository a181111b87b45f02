// Package h3conn speaks HTTP/3 to an Alt-Svc alternative and races the QUIC
// handshake against TCP. It is the HTTP/3 half of ferry's transport; the
// transport keeps the request flow, the Alt-Svc cache and the pool.
//
// # Contract
//
//   - [Dialer.Dial] connects to the alternative's host and port while TLS
//     verifies the certificate for the origin host (SNI = origin host) with the
//     caller's RootCAs and InsecureSkipVerify as given; only NextProtos is
//     forced to ["h3"]. A certificate that does not verify fails the dial: the
//     alternative is broken, the user's security is untouched.
//   - One UDP socket per Dialer: a quic.Transport bound to an ephemeral port
//     on the unspecified address, created by the first Dial, released when
//     the Dialer has no connection and no dial left (the next Dial opens a
//     new one), and closed by [Dialer.Close], which also closes every
//     connection the Dialer made and waits for dials in progress. Nothing
//     outlives Close except a goroutine finishing a user callback.
//   - [Conn] is a shared (multiplexed) connection with the semantics the pool
//     expects of idlepool.SharedConn: [Conn.ReserveStream], [Conn.Usable],
//     [Conn.IdleSince], [Conn.CloseIfIdle], [Conn.Close]. [Conn.RoundTrip]
//     sends one request; the request's authority (Host, :authority) stays the
//     origin whatever host the connection went to.
//   - A request that failed before any byte of it left the client (GOAWAY
//     received, connection closed, stream could not be opened) or that the
//     server refused unprocessed (H3_REQUEST_REJECTED) fails with a
//     [*RetryableError]; [IsRetryable] recognises it and
//     [RetryableError.Unsent] says whether the body is still untouched.
//   - A Conn watches its network path while it is in use: when the packets
//     it sent stay unacknowledged for 4 probe timeouts (and at least a
//     second) while quic-go keeps probing, the path is judged dead: the Conn
//     stops taking requests, calls [Config.OnPathDead] and closes, and the
//     requests on it fail with an error wrapping [ErrPathDead] (see
//     pathwatch.go for the signal and its limits).
//   - [Exchange] sends one request on a Conn with what the transport adds
//     around it: Request.Cancel, ResponseHeaderTimeout, the
//     "Expect: 100-continue" gate and net/http's errors for them. The
//     transport embeds it in its per-request state and is its
//     [ExchangeOwner]: it learns when the request becomes cancellable (to
//     register it for the deprecated Transport.CancelRequest, whose registry
//     stays in the transport) and when it ended.
//   - [Flights] runs the transport's QUIC dials: one at a time per origin,
//     a bounded number at once, on one Dialer it opens and closes
//     (CloseDialer), each with a head start that requests wait for at most
//     ([Flight.Wait]; then they go over TCP while the dial goes on). The
//     transport learns each outcome through two callbacks
//     ([FlightJob].Landed before the waiters wake, Woken after), where it
//     marks the alternative working or broken and pools the connection.
//
// # What comes from quic-go and what is added here
//
// quic-go's http3.ClientConn (v0.65) does the request encoding, trailers
// both ways, 1xx handling, cancellation by the request context, the
// MaxResponseHeaderBytes limit and resp.Proto "HTTP/3.0"; this package asks
// for gzip and decodes it (Config.DisableCompression) with net/http's rules,
// and makes request body failures and the Got1xxResponse hook's error end
// the request as in net/http (see Conn.RoundTrip). quic-go fires the httptrace hooks WroteHeaderField, WroteHeaders,
// WroteRequest, GotFirstResponseByte, Got1xxResponse and Got100Continue.
// It fires no connection hooks when a ClientConn is used directly, so this
// package fires DNSStart/DNSDone (default resolver only), ConnectStart/Done
// ("udp"), TLSHandshakeStart/Done in Dial and GotConn in RoundTrip. GetConn
// is the transport's: it fires before it looks in the pool. QUIC has no
// separate connect phase, so the TLS hooks nest inside the connect hooks
// (ConnectStart, TLSHandshakeStart, TLSHandshakeDone, ConnectDone), as in
// quic-go's own http3.Transport. The net.Conn given to GotConn reports the
// QUIC addresses and refuses I/O and Close.
//
// RoundTrip expects a request the transport already validated (header
// names and values, method): quic-go rejects a bad one only while encoding
// it, which this package cannot tell from a connection that went away, so
// it would be reported as an unsent, retryable failure.
//
// quic-go exposes neither the peer's stream limit nor the GOAWAY it
// received. Stream capacity is therefore a local cap
// ([Config.MaxConcurrentStreams], default 100, quic-go's own server
// default); a request beyond the peer's real limit waits in quic-go for a
// stream instead of failing. A GOAWAY is learnt from its effects: the first
// request that cannot open a stream marks the connection unusable, and the
// connection closing (quic-go closes it once the last stream after a GOAWAY
// ends) does so too.
//
// DialEvents carries the httptrace hooks of a QUIC dial that runs on a
// goroutine no request owns (a flight) to the request
// that started it, fired on that request's goroutine while it waits
// (dialevents.go).
package h3conn
