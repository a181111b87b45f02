package dialer

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http/httptrace"
	"time"
)

// ErrTLSHandshakeTimeout is returned by HandshakeTLS when its timeout (not
// the context) ends the handshake. It is a net.Error with Timeout() true and
// net/http's text ("net/http: TLS handshake timeout"), as net/http's TLS
// handshake timeout error is, so code and logs matching either still work.
var ErrTLSHandshakeTimeout net.Error = handshakeTimeoutError{}

type handshakeTimeoutError struct{}

func (handshakeTimeoutError) Error() string   { return "net/http: TLS handshake timeout" }
func (handshakeTimeoutError) Timeout() bool   { return true }
func (handshakeTimeoutError) Temporary() bool { return true }

// HandshakeTLS runs the TLS client handshake over raw with cfg (the caller
// sets ServerName and NextProtos; cfg is used as is, not cloned). timeout
// bounds the handshake (0 means only ctx does). See Handshake for the hooks
// and errors; on failure raw is closed.
func HandshakeTLS(ctx context.Context, raw net.Conn, cfg *tls.Config, timeout time.Duration) (*tls.Conn, error) {
	if raw == nil {
		return nil, errors.New("dialer: HandshakeTLS on a nil connection")
	}
	if cfg == nil {
		raw.Close()
		return nil, errors.New("dialer: HandshakeTLS with a nil tls.Config")
	}
	return Handshake(ctx, tls.Client(raw, cfg), timeout)
}

// Handshake completes the client handshake of tc (a no-op for the
// handshake itself when it is already done, as for a connection a caller's
// DialTLS returned). timeout bounds it (0 means only ctx does). It fires
// httptrace TLSHandshakeStart/Done from ctx, Done with an empty state on
// failure, as net/http does. On failure tc is closed and the error is
// ErrTLSHandshakeTimeout for the timeout, the context's error (errors.Is)
// when ctx ended, or the handshake's error.
func Handshake(ctx context.Context, tc *tls.Conn, timeout time.Duration) (*tls.Conn, error) {
	if err := handshake(ctx, tc, tc, tc, timeout); err != nil {
		return nil, err
	}
	return tc, nil
}

// ConnectionStater is a connection that reports its TLS state, as Go
// 1.27's net/http accepts from a caller's DialTLSContext in place of a
// *tls.Conn (for ALPN and Response.TLS).
type ConnectionStater interface {
	ConnectionState() tls.ConnectionState
}

// handshaker is a connection that can complete a TLS handshake.
type handshaker interface {
	HandshakeContext(context.Context) error
}

// HandshakeStater is Handshake (without a timeout) for conn, a connection
// that is not a *tls.Conn but reports its TLS state through cs (conn
// itself, seen through the interface): its HandshakeContext runs first
// when it has one. The hooks fire and failures are reported as for
// Handshake; on failure conn is closed.
func HandshakeStater(ctx context.Context, conn net.Conn, cs ConnectionStater) error {
	hs, _ := cs.(handshaker)
	return handshake(ctx, conn, hs, cs, 0)
}

// handshake runs hs (none: already done) with the trace hooks of ctx and
// the error mapping Handshake documents.
func handshake(ctx context.Context, conn net.Conn, hs handshaker, cs ConnectionStater, timeout time.Duration) error {
	trace := httptrace.ContextClientTrace(ctx)
	hsCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		hsCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if trace != nil && trace.TLSHandshakeStart != nil {
		trace.TLSHandshakeStart()
	}
	var err error
	if hs != nil {
		err = hs.HandshakeContext(hsCtx)
	}
	if err != nil {
		if ctx.Err() == nil && hsCtx.Err() != nil {
			err = ErrTLSHandshakeTimeout
		} else if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = &net.OpError{Op: "tls handshake", Net: "tcp", Addr: conn.RemoteAddr(), Err: ctx.Err()}
		}
		conn.Close()
		if trace != nil && trace.TLSHandshakeDone != nil {
			trace.TLSHandshakeDone(tls.ConnectionState{}, err)
		}
		return err
	}
	if trace != nil && trace.TLSHandshakeDone != nil {
		trace.TLSHandshakeDone(cs.ConnectionState(), nil)
	}
	return nil
}
