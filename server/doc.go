// Package server serves an existing *http.Server over HTTP/1.1 and HTTP/2 on
// TCP and HTTP/3 on UDP, on the same port, and shuts all three down together.
//
// Contract:
//
//   - Wrap keeps the user's http.Server untouched. When serving starts, every
//     exported field of it (Addr, Handler, TLSConfig, the timeouts,
//     MaxHeaderBytes, TLSNextProto, ConnState, ErrorLog, BaseContext,
//     ConnContext, HTTP2, Protocols, and any field a later Go adds) is copied
//     into a private http.Server that serves TCP, so TCP behaves exactly as
//     the bare server would. Changes to the user's struct after serving
//     started have no effect; its methods (Shutdown, Close,
//     RegisterOnShutdown, SetKeepAlivesEnabled) do not reach the running
//     server — call the wrapper's. In particular, golang.org/x/net's
//     http2.ConfigureServer registers its graceful-shutdown hook with the
//     user's struct (RegisterOnShutdown), which the private copy never
//     runs: on Shutdown, idle HTTP/2 clients of such a server are not sent
//     GOAWAY and hold Shutdown until they leave or its context ends.
//     net/http's own HTTP/2 is unaffected; configure it through the
//     http.Server's HTTP2 and Protocols fields instead of ConfigureServer.
//   - ListenTLS / ListenAndServeTLS bind TCP first, then UDP on the port the
//     kernel gave TCP (retrying a few times with a fresh TCP port when the
//     port was chosen by the kernel and that UDP port is taken). HTTP/3 uses
//     quic-go's http3.Server with the same handler and the equivalent limits:
//     MaxHeaderBytes as net/http's HTTP/2 server enforces it (plus 320
//     bytes, each field counted as name + value + 32), IdleTimeout
//     (ReadTimeout when zero, as net/http does), the TLS handshake bounded
//     like net/http's (the smallest of ReadHeaderTimeout/ReadTimeout/
//     WriteTimeout), per-request read/write deadlines from
//     ReadTimeout/WriteTimeout, a clone of TLSConfig with ALPN "h3",
//     BaseContext (called once for the UDP socket with a net.Listener view
//     of it; its values reach every request, and cancelling it cancels the
//     request contexts as over TCP, without closing QUIC connections),
//     ConnContext (given a *QUICConn), ConnState (StateNew and StateClosed
//     per QUIC connection; HTTP/3 has no per-connection Active/Idle) and
//     ErrorLog. Request contexts carry http.ServerContextKey on every
//     protocol.
//   - An HTTP/3 request's header is bounded as over TCP: in time by
//     ReadHeaderTimeout (ReadTimeout when zero; none when both are zero or
//     negative), counted from the stream's first frame until quic-go has
//     parsed its HEADERS frame; in memory by MaxHeaderBytes (quic-go
//     refuses a HEADERS frame declaring more, with 431, and buffers a
//     partial one only as far as it has arrived). quic-go's http3.Server
//     reads the header before any code of ours sees the stream and gives
//     no handle on it, so the wrapper learns when each header phase begins
//     and ends from quic-go's qlog events (it sets quic.Config.Tracer,
//     passing every event on to a Tracer the user set) and, when one
//     outlives the timeout, closes that whole connection with
//     H3_REQUEST_INCOMPLETE, also ending the other requests on it. With a
//     Tracer set, quic-go builds an event per packet sent and received: in
//     BenchmarkH3RequestHeaderWatch a GET costs about 25 allocations more
//     (219 to 244, client and server together) and a 256 KiB POST about
//     770 more (1,510 to 2,280). Over HTTP/3, ReadTimeout bounds reading
//     the body from the handler's start.
//   - HTTP/3 address validation: quic-go creates a connection (four
//     goroutines and its buffers, kept until the handshake timeout) for
//     every Initial packet from an address it has not validated, so a
//     flood of spoofed or abandoned Initials costs in proportion. The
//     wrapper counts half-open handshakes (from the connection's creation
//     until HTTP/3 accepts it or it closes) and, once QUICRetryThreshold
//     of them (DefaultQUICRetryThreshold, 64, when zero) are open, answers
//     new clients without an address token with a QUIC Retry: one extra
//     round trip for them, no state kept for a spoofed source. A flood
//     then holds at most about that many connections. QUICRetryAlways
//     validates every client, QUICRetryNever none (quic-go's default).
//   - While HTTP/3 is listening, every TCP response carries
//     `Alt-Svc: h3=":PORT"; ma=N` (set before the handler runs, so a handler
//     may change or delete it). It is not sent when HTTP/3 is disabled, when
//     serving cleartext, or once shutdown has begun.
//   - Shutdown stops accepting on every listener, sends HTTP/3 GOAWAY, waits
//     for in-flight requests on all protocols, then returns, leaving no
//     goroutine behind. As net/http closes a new TCP connection that has
//     sent no request for 5 s, Shutdown closes (H3_NO_ERROR) an HTTP/3
//     connection on which no handler was ever called once it is 5 s old.
//     An HTTP/3 connection that has run a handler is closed once no
//     handler runs and its client has sent nothing for 1 s (the server's
//     IdleTimeout when shorter), as net/http's HTTP/2 closes a connection
//     1 s after GOAWAY once its streams ended: a client that went away, or
//     was cut off, without closing does not hold Shutdown. A client still
//     sending (acknowledging, reading a response) is not cut, because
//     closing a QUIC connection discards response data it has not read
//     yet (TCP delivers it after close); it is left to GOAWAY and
//     Shutdown's context, as quic-go's own Shutdown leaves it. So a client
//     that made a request, keeps its connection alive and ignores GOAWAY
//     holds Shutdown until its context ends (forever with
//     context.Background()); give Shutdown a deadline. "Called" means the
//     handler started: a request whose header is still arriving does not
//     count. If Shutdown's context ends first, it returns the context's
//     error at once, as net/http's; HTTP/3 handlers still running finish
//     in the background, as after Close. Close ends every listener and
//     connection at once; like net/http's it does not wait for handlers.
//     HTTP/3 handlers still running (their contexts are cancelled) keep,
//     besides their own goroutines, one goroutine of ours that waits for
//     them and, in quic-go, one per connection on which a handler runs;
//     all of these exit when the last handler returns. A Shutdown waiting
//     when Close is called, or called after it, returns nil without waiting
//     for them, as net/http's does.
//   - ListenerOptions are applied once to each accepted TCP connection, on
//     the accepting goroutine, through a sockopt.Guard; nothing is applied per
//     request. ReusePort sets SO_REUSEPORT on the TCP and UDP sockets before
//     bind so several servers can share a port.
//   - The kernel listen backlog is Go's: on Linux the net package passes
//     /proc/sys/net/core/somaxconn (read once per process) to listen(2), so
//     the backlog is the system limit; the tests check it through sock_diag.
package server
