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
// the context) ends the handshake. It is a net.Error with Timeout() true, as
// net/http's TLS handshake timeout error is.
var ErrTLSHandshakeTimeout net.Error = handshakeTimeoutError{}

type handshakeTimeoutError struct{}

func (handshakeTimeoutError) Error() string   { return "dialer: TLS handshake timeout" }
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
	err := tc.HandshakeContext(hsCtx)
	if err != nil {
		if ctx.Err() == nil && hsCtx.Err() != nil {
			err = ErrTLSHandshakeTimeout
		} else if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = &net.OpError{Op: "tls handshake", Net: "tcp", Addr: tc.RemoteAddr(), Err: ctx.Err()}
		}
		tc.Close()
		if trace != nil && trace.TLSHandshakeDone != nil {
			trace.TLSHandshakeDone(tls.ConnectionState{}, err)
		}
		return nil, err
	}
	if trace != nil && trace.TLSHandshakeDone != nil {
		trace.TLSHandshakeDone(tc.ConnectionState(), nil)
	}
	return tc, nil
}
