package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/ferryhttp/ferry/internal/sockopt"
)

// SocketOption is a socket option to apply to whichever connection serves
// a request (see WithSocketOptions).
type SocketOption struct {
	opt   sockopt.Option
	value int
}

// TOS sets the IP traffic class byte (IP_TOS / IPV6_TCLASS), 0..255.
func TOS(v int) SocketOption { return SocketOption{sockopt.TOS, v} }

// TCPUserTimeout sets TCP_USER_TIMEOUT (Linux): how long sent data may stay
// unacknowledged before the connection is dropped. Zero means the system
// default. The kernel counts milliseconds: a fraction of one is rounded up,
// away from zero (as Go rounds keep-alive periods), so a timeout under a
// millisecond is not taken for zero and a negative one is always invalid.
func TCPUserTimeout(d time.Duration) SocketOption {
	ms := d / time.Millisecond
	if rem := d % time.Millisecond; rem > 0 {
		ms++
	} else if rem < 0 {
		ms--
	}
	return SocketOption{sockopt.UserTimeout, int(ms)}
}

// TCPNoDelay sets TCP_NODELAY (on by default in Go).
func TCPNoDelay(on bool) SocketOption {
	v := 0
	if on {
		v = 1
	}
	return SocketOption{sockopt.NoDelay, v}
}

type socketOptionsKey struct{}

// WithSocketOptions returns a context whose requests apply opts to the
// socket of the connection that serves them.
//
// Every request checks the options before it takes a connection, whatever
// protocol serves it: a value out of range (TOS(300), a negative
// TCPUserTimeout) fails the request with an error wrapping
// sockopt.ErrInvalidValue, and no connection is dialled or used.
//
// Valid options are applied through the connection's guard: a value
// already in effect on that socket costs no syscall, so a steady stream of
// requests with the same options makes no setsockopt call.
//
//   - HTTP/1.1: the connection serves one request at a time, so the options
//     are in effect for that request.
//   - HTTP/2: the options are applied to the TCP connection under the
//     shared connection (under its TLS, or to the proxy socket for a
//     CONNECT tunnel) before the request is sent. They apply to the whole
//     connection, so every request on it, in flight or later, goes out with
//     them; concurrent requests asking for different values leave the last
//     one applied in effect. Give requests that need different values
//     different Transports (or HTTP/1.1) when that matters.
//   - HTTP/3: the options are checked but not applied. QUIC connections
//     share one UDP socket, and quic-go writes the traffic-class byte of
//     every packet itself (for ECN), so a TOS set on the socket would not
//     reach the wire; TCP options have no UDP meaning.
//
// A connection that cannot carry socket options (for example one from a
// custom DialContext or DialTLSContext that is not a TCP connection) fails
// the request with an error wrapping sockopt.ErrUnsupported; an HTTP/1.1
// connection is then closed, a shared HTTP/2 one is left to the requests it
// serves. A setsockopt the kernel refuses fails the request with its errno.
func WithSocketOptions(ctx context.Context, opts ...SocketOption) context.Context {
	return context.WithValue(ctx, socketOptionsKey{}, opts)
}

func socketOptionsFrom(ctx context.Context) []SocketOption {
	opts, _ := ctx.Value(socketOptionsKey{}).([]SocketOption)
	return opts
}

// validateSocketOptions checks opts as a guard does before its syscall,
// returning the same error, so a request fails alike over every protocol.
func validateSocketOptions(opts []SocketOption) error {
	for _, o := range opts {
		if err := sockopt.Validate(o.opt, o.value); err != nil {
			return err
		}
	}
	return nil
}

// newSocketGuard makes a guard for the socket under conn (under its TLS
// when it is a *tls.Conn), for a connection ferry did not dial itself.
func newSocketGuard(conn net.Conn) (*sockopt.Guard, error) {
	raw := conn
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("ferry/transport: socket options on %T: %w", raw, sockopt.ErrUnsupported)
	}
	g, err := sockopt.NewGuard(sc)
	if err != nil {
		return nil, fmt.Errorf("ferry/transport: socket options: %w", err)
	}
	return g, nil
}

// connSocket is the socket under a connection, for the socket options of
// the requests it serves: an HTTP/1.1 connection's, one at a time, or a
// shared (HTTP/2) connection's, concurrently. Its guard is the dialer's
// when ferry dialled the connection, else it is made on the first request
// with options; either outcome is kept, so a connection that cannot carry
// options fails each such request without trying again.
type connSocket struct {
	conn net.Conn // the connection as dialled (a *tls.Conn for https)

	// once makes the guard on first use. guard (when the dialer gave one)
	// is set before the connection is published and never changes; err is
	// written only inside once.
	once  sync.Once
	guard *sockopt.Guard
	err   error
}

// socketCarrier is a shared connection that knows its socket.
type socketCarrier interface {
	socket() *connSocket
}

func (s *connSocket) makeGuard() {
	if s.guard == nil {
		s.guard, s.err = newSocketGuard(s.conn)
	}
}

// guardNow returns the socket's guard, making it on first use, or the
// reason the socket cannot carry options.
func (s *connSocket) guardNow() (*sockopt.Guard, error) {
	s.once.Do(s.makeGuard)
	return s.guard, s.err
}

// apply applies opts through the socket's guard (safe for concurrent use:
// the guard serialises its syscalls).
func (s *connSocket) apply(opts []SocketOption) error {
	g, err := s.guardNow()
	if err != nil {
		return err
	}
	for _, o := range opts {
		if _, err := g.Set(o.opt, o.value); err != nil {
			return err
		}
	}
	return nil
}

// testHookSharedOptions, when set by a test, runs between taking a shared
// connection and applying a request's socket options to it.
var testHookSharedOptions func(sharedConn)

// applySharedOptions applies a request's socket options to sc, whose
// stream it has reserved. On failure the stream is given back and the
// connection stays, for its other requests; retry reports that sc died
// after the stream was reserved (the setsockopt met its closed socket):
// nothing was sent, so the request looks again (a counted retry), as one
// without options would be retried.
func (t *Transport) applySharedOptions(key connKey, sc sharedConn, opts []SocketOption, att *sharedAttempts) (retry bool, err error) {
	if testHookSharedOptions != nil {
		testHookSharedOptions(sc)
	}
	if err := applySharedSocketOptions(sc, opts); err != nil {
		sc.ReleaseStream()
		if !sc.Usable() && att.retries < maxSharedRetries {
			t.pool.RemoveShared(key, sc)
			att.retries++
			t.stats.countRetry()
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// applySharedSocketOptions applies opts to the socket under sc; a shared
// connection that does not know its socket cannot carry them.
func applySharedSocketOptions(sc sharedConn, opts []SocketOption) error {
	c, ok := sc.(socketCarrier)
	if !ok {
		return fmt.Errorf("ferry/transport: socket options on %T: %w", sc, sockopt.ErrUnsupported)
	}
	return c.socket().apply(opts)
}
