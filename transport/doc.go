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
//     (also on error), sets resp.Request to the caller's request (except,
//     as in net/http, an https request with a body served on an HTTP/2
//     connection it found pooled: a shallow copy whose Body is the one
//     sent) and returns a nil error whenever it obtained a response.
//   - HTTP/1.1 requests are written and response heads read on the caller's
//     goroutine (internal/h1conn, whose Conn the pool holds through the
//     small h1conn.Owner interface and shared h1conn.Config); a request body
//     that is not known to be in memory is written by one goroutine for that
//     request only, so a server may answer before it has read the whole
//     body.
//   - A response body read to EOF hands its connection back to the pool
//     before the caller sees io.EOF; a body closed early closes the
//     connection, except that, built with Go 1.27 or later, ferry does what
//     net/http 1.27 does: when the connection could be reused and
//     resp.ContentLength is at most 256 KiB (or unknown), Close returns at
//     once, the rest (up to 256 KiB) is read and discarded in the
//     background for at most 50 ms, and the connection is kept if that
//     reaches the end of the body.
//   - Idle connections are not watched by a goroutine each. A connection the
//     server closed while idle is found when it is reused: replayable
//     requests are retried under net/http's rules, and a request that could
//     not be replayed is sent on an idle connection only after a
//     non-blocking liveness check.
//   - Errors keep their identity: context.Canceled, context.DeadlineExceeded
//     and net.Error with Timeout() == true can be tested with errors.Is and
//     errors.As.
//   - Cancellation: the request's context, Request.Cancel and the
//     deprecated CancelRequest reach a request while it waits for its
//     connection (queued for a MaxConnsPerHost slot, dialling, or waiting
//     for another request's HTTP/2 dial), as in net/http, and then while it
//     is written and its response read (CancelRequest not over HTTP/2, see
//     below). Cancelled while waiting, it ends with the context's cause, or
//     for Request.Cancel and CancelRequest with net/http's "net/http:
//     request canceled while waiting for connection"; a connection that
//     reached it anyway (a dial that finished, a connection handed over)
//     goes to the pool. A caller's DialContext or DialTLSContext gets a
//     context that carries the request's values (not its deadline, as in
//     net/http) and is cancelled only while its dial is in progress, by
//     any of the three; once the dial succeeded nothing cancels it, so a
//     connection tied to that context lives on in the pool (net/http never
//     cancels it either). Unlike net/http, which lets a dial finish in the
//     background for its pool, ferry aborts the dial of a cancelled
//     request, on the request's goroutine: a request whose dialer ignores
//     its context returns only when the dialer does.
//
// Timeouts: prefer a deadline on the request's context to
// http.Client.Timeout. net/http's Client implements Timeout through the
// context only for its own transports; for every other RoundTripper,
// including this one, it adds a Request.Cancel channel, a timer and a
// goroutine per request, which takes most of ferry's saving away (see the
// README's Compatibility section for figures).
//
// Where ferry differs from net/http on purpose (documented on the fields):
// New leaves DialContext nil because ferry dials itself, resolving names
// through a DNS cache (Resolver, DNSCacheTTL); a TLS ClientSessionCache is
// used when TLSClientConfig has none. Setting DialContext hands dialing and
// name resolution to the caller exactly as in net/http. Host names are
// lower-cased for the pool, so "Example.COM" and "example.com" share
// connections (net/http keeps one pool per spelling); the name ferry
// resolves and dials, and shows in DNSStart, dial errors and the TLS
// ServerName, is that lower-cased one. An *os.File request body with a
// known length goes out with sendfile over plain TCP, as in net/http, and
// also when it is inside io.NopCloser (net/http copies that one).
//
// # HTTP/2
//
// Which protocols are used follows net/http 1.26 exactly, so From(std)
// speaks what std would: a non-nil Protocols is the exact set; otherwise
// HTTP/1 is on and HTTP/2 is on unless TLSNextProto is a non-nil map
// without "h2", or TLSClientConfig, Dial, DialContext, DialTLS or
// DialTLSContext is set without ForceAttemptHTTP2, or GODEBUG has
// http2client=0. New leaves DialContext nil, so HTTP/2 is on for New().
// TLS offers TLSClientConfig.NextProtos adjusted to that set ("h2",
// "http/1.1"); a WebSocket upgrade request uses a key of its own and offers
// no ALPN, so it always gets HTTP/1.1. http:// URLs speak HTTP/2 with prior
// knowledge (h2c) when Protocols has UnencryptedHTTP2 and not HTTP1.
//
//   - Sharing: a connection that negotiated "h2" (also one returned by
//     DialTLSContext) is registered in the pool as a shared connection;
//     requests take a stream on it while it has one. When every connection
//     to the origin is at the server's SETTINGS_MAX_CONCURRENT_STREAMS,
//     another is opened, unless HTTP2.StrictMaxConcurrentRequests makes the
//     request wait for a stream of the connection, or MaxConnsPerHost (see
//     below) is reached.
//   - First dials: concurrent requests that find nothing in the pool for an
//     origin not known to speak HTTP/1 wait for one dial instead of each
//     dialling; if it speaks HTTP/2 they share it, if it speaks HTTP/1 (or
//     fails) they dial their own, as net/http's independent dials would.
//     An origin whose last connection spoke HTTP/1 is remembered so later
//     dials wait for nothing. (net/http dials once per waiting request and
//     closes the surplus connections.)
//   - Retries: a request the server provably did not process (GOAWAY naming
//     an earlier stream, REFUSED_STREAM, a connection that became unusable
//     before the request went out) is sent again on a connection from the
//     pool, whether or not the first one was reused, when its body can be
//     produced again (no body, GetBody, or a body not yet read); at most 7
//     retries (8 attempts, as net/http), the first at once and the others
//     after 1, 2, 4 ... 32 s with net/http's jitter. A body that cannot be
//     sent again fails with net/http's "cannot retry" error (wrapping the
//     stream error), and when the retries run out the last attempt's error
//     is returned. A request whose granted stream found no room when it was
//     to go out (the server's SETTINGS arrived after the grant, or a stream
//     just reset by a cancelled request still counted; nothing sent, body
//     unread) looks again at once, on the same connection
//     under MaxConnsPerHost or another one; that does not count as a retry.
//   - Settings: HTTP2 (frame and header table sizes, receive buffers, ping
//     health checks, WriteByteTimeout, CountError), MaxResponseHeaderBytes,
//     DisableCompression (transparent gzip as net/http's HTTP/2),
//     DisableKeepAlives (one request per connection), ExpectContinueTimeout
//     and ResponseHeaderTimeout apply to HTTP/2 connections.
//   - Idle connections: a shared connection with no stream in use for
//     IdleConnTimeout is closed by the pool's sweep (no timer per
//     connection); CloseIdleConnections closes those without streams.
//   - Per request: resp.Proto is "HTTP/2.0", resp.TLS is set, trailers and
//     bodies stream both ways, cancelling one request resets its stream only.
//     GetConn, DNS/connect/TLS (for the request that dialled), GotConn (with
//     Reused, WasIdle, IdleTime), WroteHeaderField, WroteHeaders,
//     WroteRequest and GotFirstResponseByte fire as in net/http; PutIdleConn
//     does not fire for HTTP/2 (nor in net/http). CancelRequest does not
//     cancel an HTTP/2 request once it has its stream (nor in net/http).
//   - TLSNextProto: a caller's function for the negotiated protocol is
//     handed the *tls.Conn and its RoundTripper then serves every request
//     of that origin (until CloseIdleConnections), as in net/http.
//   - MaxConnsPerHost counts each HTTP/2 connection once and is a hard
//     limit: a request that finds every connection full and the limit
//     reached waits in the pool, in arrival order and cancellable, and is
//     woken when a stream frees (a stream reset by a cancelled request and
//     awaiting its PING acknowledgement wakes it once acknowledged); a second stream on a new connection waits for the
//     server's SETTINGS. This differs from net/http on purpose: net/http
//     1.26 gives a full HTTP/2 connection's slot back and dials another
//     (10 concurrent requests, 2 streams per connection, MaxConnsPerHost 1:
//     net/http opens 3 to 5 connections, ferry 1).
//
// HTTP/2 is ferry's own client connection, internal/h2conn, framed with
// golang.org/x/net/http2's Framer and hpack.
//
// # HTTP/3
//
// HTTP/3 is used for an https origin once it advertised it with an Alt-Svc
// header (RFC 7838) on any response (HTTP/1.1, HTTP/2 or HTTP/3). Transport
// does not guess: an origin that never said so is only reached over TCP.
//
//   - Discovery: every https response's Alt-Svc header updates the
//     Transport's cache (the AltSvc field, or a private one); `clear`
//     removes the origin's alternatives, `ma` (24 h by default, shortened by
//     Age) bounds how long they are used. Cleartext responses are ignored.
//     When a header leaves the origin with a usable "h3" alternative and no
//     HTTP/3 connection to it exists, the QUIC handshake starts at once in
//     the background, so the next request usually goes over HTTP/3 with no
//     wait.
//   - Routing: a request whose origin has a live, not-broken "h3"
//     alternative uses a pooled HTTP/3 connection to it (one per origin and
//     alternative, shared by concurrent requests). The connection goes to
//     the alternative's host and port; TLS verifies the certificate for the
//     origin's host (SNI is the origin's host) with TLSClientConfig's roots,
//     and the request's authority stays the origin. A certificate that does
//     not verify fails the alternative, never the request.
//   - Racing: with no HTTP/3 connection ready, the request joins the QUIC
//     dial for that alternative (one dial at a time, whatever the number of
//     requests). If a TCP connection is at hand (an idle HTTP/1.1 one, or an
//     HTTP/2 one with a free stream) it is used at once and the dial goes on
//     in the background; otherwise the request waits for QUIC until a head
//     start of 275 ms after the dial began, then dials TCP. The head start
//     belongs to the dial, not to each request, so a network that drops UDP
//     costs it once.
//   - Backoff: a dial that fails (timeout, refused, bad certificate) marks
//     the alternative broken in the cache: it is not tried for 5 minutes,
//     doubling with each further failure up to 48 hours; a successful dial
//     resets that. Requests meanwhile go over TCP and pay nothing.
//   - Retries: a request the HTTP/3 connection did not send at all (GOAWAY,
//     connection lost before its headers left) goes over TCP unchanged,
//     whatever its method and body; one refused unprocessed
//     (H3_REQUEST_REJECTED, which guarantees the server did nothing) is
//     resent over TCP when its body can be produced again (no body, or
//     GetBody), as x/net does for HTTP/2's REFUSED_STREAM; otherwise it
//     fails with an error saying the body cannot be rewound.
//   - Per request: bodies, trailers, gzip (DisableCompression),
//     MaxResponseHeaderBytes, ResponseHeaderTimeout, ExpectContinueTimeout,
//     Request.Cancel, context cancellation and the deprecated CancelRequest
//     behave as over HTTP/1.1 (CancelRequest too, because HTTP/3 replaced
//     such a request transparently); resp.Proto is "HTTP/3.0".
//   - Tracing: GetConn fires when the request is routed to HTTP/3, and not
//     again if it then goes over TCP without an HTTP/3 attempt; a request
//     retried over TCP after one fires it again, as net/http does for
//     every retry.
//     The request that starts the QUIC dial and waits for it sees the
//     dial's DNSStart/DNSDone (a named alternative), ConnectStart/Done with
//     network "udp" and TLSHandshakeStart/Done, on its own goroutine; QUIC
//     has no separate connect phase, so the TLS hooks nest inside the
//     connect hooks. If it stops waiting (head start over, cancelled), the
//     phases still open end at once with that reason
//     (h3conn.ErrHeadStartExpired wrapped, or the context's error) and no
//     hook of the dial reaches it afterwards; then come the TCP hooks.
//     Requests that join a dial in progress, or take a TCP connection at
//     hand without waiting, see no QUIC dial hooks. GotConn (its net.Conn
//     reports the QUIC addresses and refuses I/O), WroteHeaderField,
//     WroteHeaders, WroteRequest, GotFirstResponseByte, Got1xxResponse and
//     Got100Continue fire as over HTTP/2; PutIdleConn does not.
//   - Not used when DisableHTTP3, DisableKeepAlives or a Dial/DialTLS hook
//     is set, when HTTP/2 is turned off explicitly (Protocols without
//     HTTP2, a TLSNextProto map without "h2", GODEBUG http2client=0),
//     through a proxy, or for CONNECT and Upgrade requests.
//   - MaxConnsPerHost counts QUIC and TCP connections together: a QUIC
//     dial and its connection hold a slot under the origin's TCP key, and
//     a dial closes an idle TCP connection of the origin for its slot when
//     the limit is reached. With a limit, the QUIC handshake is not started
//     in the background after the first Alt-Svc response but by the next
//     request.
//   - A difference that comes with it: quic-go fails a request whose final
//     response follows more than five informational (1xx) responses, which
//     net/http accepts.
//   - Resources: the QUIC connections share one UDP socket, opened by the
//     first dial. CloseIdleConnections closes idle HTTP/3 connections and,
//     once none is in use, the socket too (abandoning dials in progress), so
//     a program or test that calls it leaves no goroutine behind.
//
// # Network changes
//
// When the machine's addresses change, cached alternatives may no longer be
// reachable and broken marks no longer mean anything: call
// Transport.NetworkChanged. Go has no portable notification; on Linux a
// program can subscribe to address changes with a netlink socket from
// golang.org/x/sys/unix and call NetworkChanged on each message:
//
//	fd, _ := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
//	unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK,
//		Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR})
//	buf := make([]byte, 4096)
//	for {
//		if _, _, err := unix.Recvfrom(fd, buf, 0); err != nil {
//			break
//		}
//		tr.NetworkChanged()
//	}
//
// Anywhere else, polling net.InterfaceAddrs every few seconds and calling
// NetworkChanged when the set differs does the same job.
//
// # Proxies
//
// Proxy is consulted once per request and again before an HTTP/1.1 retry,
// as net/http does, so a retry can take another route (New uses http.ProxyFromEnvironment
// itself: HTTP_PROXY, HTTPS_PROXY, NO_PROXY, read once per process, never
// for localhost or loopback targets). Supported schemes are http (also an
// empty scheme), https, socks5 and socks5h; any other fails the request
// with ErrProxyNotSupported before anything is dialled.
//
//   - http target through an http or https proxy: the request is sent to
//     the proxy in absolute form ("GET http://host/path"), with
//     Proxy-Authorization (Basic) from the proxy URL's user info. One
//     connection to the proxy serves every http target.
//   - https target through an http or https proxy: a CONNECT tunnel (with
//     ProxyConnectHeader or GetProxyConnectHeader, and Proxy-Authorization
//     from the URL; OnProxyConnectResponse sees the reply), bounded by one
//     minute like net/http's, then TLS to the target inside the tunnel,
//     negotiating HTTP/2 there when allowed. An https proxy means TLS to
//     the proxy first (verified for the proxy host, HTTP/1.1 only).
//   - any target through socks5/socks5h: a SOCKS5 tunnel (user/password
//     from the URL); the proxy resolves the target name for both schemes,
//     as in net/http.
//
// The proxy (scheme, host, port and credentials, the latter only as a
// digest) is part of the pool key. The proxy connection is dialled like a
// direct one: ferry's dialer with its DNS cache (for the proxy host; the
// target is resolved by the proxy), or DialContext/Dial, or, for an https
// proxy, DialTLSContext/DialTLS. httptrace's GetConn reports the proxy's
// host:port and the connect hooks fire for it. Proxy credentials never
// reach the origin and never appear in an error text. Errors: a
// *net.OpError with Op "proxyconnect" when the proxy cannot be reached, a
// *ProxyStatusError when it refuses CONNECT (its text contains the status
// text net/http reports), and wrapped errors naming the proxy for a
// malformed or truncated CONNECT reply or a SOCKS failure. HTTP/3 is never
// used through a proxy.
//
// Where proxying differs from net/http: credentials in the proxy URL
// replace a Proxy-Authorization header the caller set (net/http sends
// both); a request with an invalid Host is refused before the proxy is
// dialled; the SOCKS5 handshake is bounded like CONNECT; GetConn names the
// proxy also for a reused HTTP/2 connection through it (net/http names the
// target there); the CONNECT target's host is sent in lower case.
package transport
