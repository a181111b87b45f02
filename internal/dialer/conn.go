package dialer

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/ferryhttp/ferry/internal/dnscache"
	"github.com/ferryhttp/ferry/internal/sockopt"
)

// newConn wraps a winning connection: records its endpoints, creates its
// Guard and applies keep-alive and d.Settings. It closes c on failure.
func (d *Dialer) newConn(c net.Conn, remote netip.AddrPort) (*Conn, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: tcpAddr(remote), Err: fmt.Errorf("dialer: unexpected connection type %T", c)}
	}
	conn := &Conn{Conn: tc, Remote: remote}
	family := sockopt.FamilyUnknown
	if la, ok := tc.LocalAddr().(*net.TCPAddr); ok {
		ap := la.AddrPort()
		conn.Local = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		family = familyOf(la.IP)
	}
	if !sockopt.Supported {
		if err := d.applyPortable(tc); err != nil {
			tc.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: tcpAddr(remote), Err: err}
		}
		return conn, nil
	}
	var g *sockopt.Guard
	var err error
	if family != sockopt.FamilyUnknown {
		g, err = sockopt.NewGuardFamily(tc, family)
	} else {
		g, err = sockopt.NewGuard(tc)
	}
	if err == nil {
		conn.Guard = g
		// Go turns TCP_NODELAY on for every TCP connection it creates.
		err = g.Assume(sockopt.NoDelay, 1)
	}
	if err == nil {
		// Keep-alive is best effort, as net.Dialer's: a system that rejects
		// an option (some kernels cap the idle time, OpenBSD refuses
		// per-socket values) still gets its connection.
		_ = g.Apply(d.keepAliveSettings())
		err = g.Apply(d.Settings)
	}
	if err != nil {
		tc.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: tcpAddr(remote), Err: err}
	}
	return conn, nil
}

// applyPortable applies keep-alive through the net package where the guard
// is unsupported, best effort as net.Dialer does (OpenBSD, for one, rejects
// per-socket keep-alive times); other Settings cannot be honoured there and
// fail the dial.
func (d *Dialer) applyPortable(tc *net.TCPConn) error {
	if d.KeepAlive >= 0 {
		idle := d.KeepAlive
		if idle == 0 {
			idle = defaultKeepAliveIdle
		}
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: idle, Interval: defaultKeepAliveInterval, Count: defaultKeepAliveCount})
	}
	if len(d.Settings) > 0 {
		return fmt.Errorf("dialer: socket option %s: %w", d.Settings[0].Option, sockopt.ErrUnsupported)
	}
	return nil
}

// familyOf infers the socket family from the local address the net package
// read with getsockname: a 4-byte IP comes only from an AF_INET socket, a
// 16-byte IPv4-mapped one from an AF_INET6 socket carrying IPv4 (either way
// IP_TOS is the right option), anything else is IPv6.
func familyOf(ip net.IP) sockopt.Family {
	switch {
	case len(ip) == net.IPv4len:
		return sockopt.FamilyIPv4
	case len(ip) == net.IPv6len && ip.To4() != nil:
		return sockopt.FamilyIPv4Mapped
	case len(ip) == net.IPv6len:
		return sockopt.FamilyIPv6
	}
	return sockopt.FamilyUnknown
}

func tcpAddr(ap netip.AddrPort) *net.TCPAddr {
	return net.TCPAddrFromAddrPort(ap)
}

// contextError reports the context ending during a dial, as net.Dialer
// does: a *net.OpError reading "dial tcp addr: i/o timeout" for a deadline
// (Timeout() true) or "dial tcp addr: operation was canceled", whose Err
// satisfies errors.Is(err, context.DeadlineExceeded / Canceled).
func contextError(addr netip.AddrPort, err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: tcpAddr(addr), Err: dnscache.NetContextError(err)}
}
