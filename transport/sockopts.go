package transport

import (
	"context"
	"crypto/tls"
	"fmt"
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
// default.
func TCPUserTimeout(d time.Duration) SocketOption {
	return SocketOption{sockopt.UserTimeout, int(d / time.Millisecond)}
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
// connection that serves them, through the connection's guard: a value
// already in effect on that connection costs no syscall, so a steady stream
// of requests with the same options makes no setsockopt call. A connection
// that cannot carry socket options (for example one from a custom
// DialContext that is not a TCP connection) fails the request with an error
// wrapping sockopt.ErrUnsupported.
func WithSocketOptions(ctx context.Context, opts ...SocketOption) context.Context {
	return context.WithValue(ctx, socketOptionsKey{}, opts)
}

func socketOptionsFrom(ctx context.Context) []SocketOption {
	opts, _ := ctx.Value(socketOptionsKey{}).([]SocketOption)
	return opts
}

// applySocketOptions applies opts through pc's guard, creating the guard
// on first use for connections ferry did not dial itself.
func (pc *h1Conn) applySocketOptions(opts []SocketOption) error {
	if pc.guard == nil {
		if pc.noGuard {
			return fmt.Errorf("ferry/transport: socket options: %w", sockopt.ErrUnsupported)
		}
		raw := pc.conn
		if tc, ok := raw.(*tls.Conn); ok {
			raw = tc.NetConn()
		}
		sc, ok := raw.(syscall.Conn)
		if !ok {
			pc.noGuard = true
			return fmt.Errorf("ferry/transport: socket options on %T: %w", raw, sockopt.ErrUnsupported)
		}
		g, err := sockopt.NewGuard(sc)
		if err != nil {
			pc.noGuard = true
			return fmt.Errorf("ferry/transport: socket options: %w", err)
		}
		pc.guard = g
	}
	for _, o := range opts {
		if _, err := pc.guard.Set(o.opt, o.value); err != nil {
			return err
		}
	}
	return nil
}
