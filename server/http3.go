package server

import (
	"context"
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// quicTLSConfig clones cfg for QUIC, offering only ALPN "h3".
func quicTLSConfig(cfg *tls.Config) *tls.Config {
	return http3.ConfigureTLSConfig(cfg)
}

// handshakeTimeout bounds the TLS handshake as net/http does: the smallest
// of ReadHeaderTimeout, ReadTimeout and WriteTimeout that is set, or zero.
func handshakeTimeout(hs *http.Server) time.Duration {
	var d time.Duration
	for _, t := range []time.Duration{hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	return d
}

// requestHeaderTimeout is net/http's bound on reading a request's header:
// ReadHeaderTimeout, or ReadTimeout when that is zero; zero or negative
// means none.
func requestHeaderTimeout(hs *http.Server) time.Duration {
	d := hs.ReadHeaderTimeout
	if d == 0 {
		d = hs.ReadTimeout
	}
	return max(d, 0)
}

// quicConfig returns the QUIC configuration: a clone of user (or a fresh
// one) with the handshake timeout filled in from the HTTP server's limits
// and, when the server bounds request headers, a Tracer installing a
// headerWatch on every connection (the user's Tracer still receives every
// event).
func quicConfig(user *quic.Config, hs *http.Server) *quic.Config {
	var cfg *quic.Config
	if user != nil {
		cfg = user.Clone()
	} else {
		cfg = &quic.Config{}
	}
	if cfg.HandshakeIdleTimeout == 0 {
		cfg.HandshakeIdleTimeout = handshakeTimeout(hs)
	}
	if d := requestHeaderTimeout(hs); d > 0 {
		cfg.Tracer = headerWatchTracer(d, cfg.Tracer)
	}
	return cfg
}

// h3MaxHeaderBytes is the HTTP/3 header limit for an http.Server's
// MaxHeaderBytes n: the limit net/http's HTTP/2 server enforces, n
// (http.DefaultMaxHeaderBytes when n <= 0) plus 320 bytes, the RFC's 32
// bytes of per-field overhead for ten typical fields. HTTP/2 and quic-go
// both count each field as name + value + 32, so a header block HTTP/2
// accepts is accepted over HTTP/3 too. (HTTP/1.1 reads up to n + 4096
// bytes of raw header.)
func h3MaxHeaderBytes(n int) int {
	const perFieldOverhead, typicalFields = 32, 10
	if n <= 0 {
		n = http.DefaultMaxHeaderBytes
	}
	return n + typicalFields*perFieldOverhead
}

// newHTTP3Server builds the HTTP/3 server equivalent to inner, the private
// copy of the user's http.Server that serves TCP.
func newHTTP3Server(inner *http.Server, handler http.Handler, conns *quicConns) *http3.Server {
	idle := inner.IdleTimeout
	if idle == 0 {
		idle = inner.ReadTimeout // net/http's rule for a zero IdleTimeout
	}
	conns.idleTimeout = idle
	h3 := &http3.Server{
		Handler: &h3Handler{
			next: handler, read: inner.ReadTimeout, write: inner.WriteTimeout,
			errorLog: inner.ErrorLog,
		},
		MaxHeaderBytes: h3MaxHeaderBytes(inner.MaxHeaderBytes),
		IdleTimeout:    idle,
		Logger:         newErrorLogger(inner.ErrorLog),
	}
	userConnContext := inner.ConnContext
	connState := inner.ConnState
	h3.ConnContext = func(ctx context.Context, c *quic.Conn) context.Context {
		// HTTP/3 takes the connection once its handshake is done: it is no
		// longer half-open for the Retry policy.
		if h, ok := ctx.Value(handshakeKey{}).(*halfOpen); ok {
			h.finish()
		}
		if w, ok := c.QlogTrace().(*headerWatch); ok {
			w.attach(c)
		}
		activity := conns.add(c)
		ctx = cancelWithBase(ctx)
		ctx = context.WithValue(ctx, http.ServerContextKey, inner)
		qc := &QUICConn{conn: c}
		if connState != nil {
			connState(qc, http.StateNew)
			context.AfterFunc(c.Context(), func() { connState(qc, http.StateClosed) })
		}
		if userConnContext != nil {
			ctx = userConnContext(ctx, qc)
			if ctx == nil {
				panic("server: ConnContext returned nil") // net/http panics the same way
			}
		}
		// Added after the user's ConnContext, which need not derive from
		// the context it is given: Shutdown must see every handler.
		return context.WithValue(ctx, activityKey{}, activity)
	}
	return h3
}

// h3Handler runs every HTTP/3 request: it counts the handlers running on
// its connection (Shutdown closes a connection only when none runs), gives
// it the read and write deadlines net/http gives a TCP connection per
// request (ReadTimeout, WriteTimeout; zero sets none) on the request stream
// before the handler runs, and logs a handler's panic as net/http does.
type h3Handler struct {
	next        http.Handler
	read, write time.Duration
	errorLog    *log.Logger // nil: the log package's standard logger
}

type streamDeadlines interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

func (h *h3Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The address is taken now, as net/http logs the connection's: a
	// middleware may rewrite r.RemoteAddr before the handler panics.
	defer h.logPanic(r.RemoteAddr)
	if a, ok := r.Context().Value(activityKey{}).(*connActivity); ok {
		a.handlerStarted()
		defer a.handlerDone()
	}
	if h.read > 0 || h.write > 0 {
		if d, ok := w.(streamDeadlines); ok {
			now := time.Now()
			if h.read > 0 {
				_ = d.SetReadDeadline(now.Add(h.read))
			}
			if h.write > 0 {
				_ = d.SetWriteDeadline(now.Add(h.write))
			}
		}
	}
	h.next.ServeHTTP(w, r)
}

// baseValues is a QUIC connection's context (which quic-go cancels when the
// connection closes) that also answers Value from the http.Server's
// BaseContext. Only the values are taken here: cancelling the base must not
// cancel the QUIC connection's context, because quic-go reads that as the
// connection closing. Cancellation reaches requests through
// cancelWithBase instead, a layer above.
type baseValues struct {
	context.Context
	base      context.Context
	handshake *halfOpen // nil when the Server counts no handshakes
}

// baseKey is the context key under which baseValues answers with the base
// context itself.
type baseKey struct{}

func (c baseValues) Value(key any) any {
	switch key {
	case baseKey{}:
		return c.base
	case handshakeKey{}:
		if c.handshake != nil {
			return c.handshake
		}
		return nil
	}
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.base.Value(key)
}

// cancelWithBase returns ctx, an HTTP/3 connection's context as given to
// http3.Server.ConnContext, cancelled also when the BaseContext is, so that
// request contexts (which quic-go derives from it) end as net/http's do.
// The QUIC connection's own context is left alone. It costs, per
// connection, a cancelable context and two context.AfterFunc
// registrations, released when the connection ends; nothing when the base
// cannot be cancelled.
func cancelWithBase(ctx context.Context) context.Context {
	base, ok := ctx.Value(baseKey{}).(context.Context)
	if !ok || base.Done() == nil {
		return ctx
	}
	ctx, cancel := context.WithCancel(ctx)
	stopBase := context.AfterFunc(base, cancel)
	// ctx ends with the connection too (it derives from conn.Context());
	// then the registration on the long-lived base is released.
	context.AfterFunc(ctx, func() { stopBase() })
	return ctx
}

// packetListener presents the UDP socket as a net.Listener for
// http.Server.BaseContext, which is called once per listener. Accept fails:
// QUIC connections are accepted by quic-go, not through this view.
type packetListener struct{ pc net.PacketConn }

func (l packetListener) Accept() (net.Conn, error) {
	return nil, &net.OpError{Op: "accept", Net: "udp", Addr: l.pc.LocalAddr(), Err: errQUICView}
}
func (l packetListener) Close() error   { return nil }
func (l packetListener) Addr() net.Addr { return l.pc.LocalAddr() }

// quicConnContext returns the quic.Transport.ConnContext that makes base's
// values visible to every connection, lets Shutdown end a connection's
// context ahead of closing it (closableConnContext) and, with a gauge,
// counts the connection as a half-open handshake until HTTP/3 accepts it
// (see newHTTP3Server) or it closes. ctx is cancelled by quic-go when the
// connection ends, whatever the cause.
func quicConnContext(base context.Context, gauge *handshakeGauge) func(context.Context, *quic.ClientInfo) (context.Context, error) {
	return func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
		c := baseValues{Context: closableConnContext(ctx), base: base}
		if gauge != nil {
			c.handshake = gauge.start()
			context.AfterFunc(ctx, c.handshake.finish)
		}
		return c, nil
	}
}
