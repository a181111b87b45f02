package dialer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache"
	"github.com/ferryhttp/ferry/internal/sockopt"
)

// DefaultFallbackDelay is the RFC 8305 "Connection Attempt Delay"
// recommended default.
const DefaultFallbackDelay = 250 * time.Millisecond

// Go's keep-alive defaults (net.Dialer), reproduced so a ferry connection
// probes exactly like a net/http one.
const (
	defaultKeepAliveIdle     = 15 * time.Second
	defaultKeepAliveInterval = 15 * time.Second
	defaultKeepAliveCount    = 9
)

// Dialer opens TCP connections. The zero Dialer is usable: system resolver
// without caching, no timeout, Go's keep-alive defaults, 250ms fallback delay.
// A Dialer must not be modified while in use; it is safe for concurrent use.
type Dialer struct {
	// DNS resolves names. nil means a direct lookup through
	// net.DefaultResolver on every Resolve (no caching).
	DNS *dnscache.Cache
	// Timeout bounds the whole connect (all attempts); for Dial it also
	// covers name resolution, as net.Dialer.Timeout does. 0 means no limit
	// beyond the context's.
	Timeout time.Duration
	// KeepAlive is the TCP keep-alive idle time, as net.Dialer.KeepAlive:
	// 0 means 15s, negative disables keep-alive probes. Probes then repeat
	// every 15s, 9 times, as in Go. As with net.Dialer, a value the system
	// rejects does not fail the dial.
	KeepAlive time.Duration
	// FallbackDelay is how long an attempt runs alone before the next
	// address is tried in parallel (RFC 8305 Connection Attempt Delay).
	// 0 means DefaultFallbackDelay; negative means no racing: the next
	// address is tried only when the previous attempt fails.
	FallbackDelay time.Duration
	// Settings are applied once, after keep-alive, to every new connection
	// through its Guard. TCP_NODELAY is already on (Go's default) and is
	// recorded as such. A setting the kernel rejects fails the dial.
	Settings []sockopt.Setting
}

// Conn is a connection the Dialer opened.
type Conn struct {
	// Conn is the *net.TCPConn.
	net.Conn
	// Guard applies socket options to this connection, remembering what is
	// already in effect. It is nil only where the platform has no guard
	// support (sockopt.Supported is false).
	Guard *sockopt.Guard
	// Local and Remote are the endpoints, recorded once at dial (IPv4
	// unmapped) so nothing asks the kernel again.
	Local, Remote netip.AddrPort
}

// Resolve returns host's addresses: an IP literal at once, a name through
// d.DNS (or the system resolver when DNS is nil). The returned slice may be
// shared with the cache: do not modify it. A failure is a *net.OpError
// ("dial tcp: lookup host: ...") wrapping the *net.DNSError, as net/http
// reports it.
func (d *Dialer) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, _, err := d.ResolveStale(ctx, host)
	return addrs, err
}

// ResolveStale is Resolve that also reports whether the answer is a stale
// one from d.DNS (past its TTL, served while a refresh runs): a dial that
// reaches none of its addresses should ask Reresolve for the name's new
// ones before it fails.
func (d *Dialer) ResolveStale(ctx context.Context, host string) (addrs []netip.Addr, stale bool, err error) {
	if ip, ok := dnscache.ParseIPLiteral(host); ok {
		return []netip.Addr{ip}, false, nil
	}
	if d.DNS != nil {
		addrs, stale, err = d.DNS.LookupNetIPStale(ctx, host)
	} else {
		// net's resolver fires the caller's httptrace DNS hooks itself.
		addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		for i, a := range addrs {
			addrs[i] = a.Unmap()
		}
		if err == nil && len(addrs) == 0 {
			err = &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	}
	if err != nil {
		return nil, false, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	return addrs, stale, nil
}

// Reresolve is for a dial that reached none of failed, a stale answer for
// host (ResolveStale): it asks d.DNS for host's answer now, waiting for
// the refresh the stale answer started or looking up once more
// (dnscache.Cache.Reresolve, which fires the DNS trace hooks), within ctx.
// It returns that answer and, in untried, its addresses that are not in
// failed, the ones worth a dial; untried is empty when the answer did not
// change or the lookup failed (the caller then reports its dial error).
func (d *Dialer) Reresolve(ctx context.Context, host string, failed []netip.Addr) (answer, untried []netip.Addr) {
	if d.DNS == nil {
		return nil, nil
	}
	answer, err := d.DNS.Reresolve(ctx, host)
	if err != nil {
		return nil, nil
	}
	for _, a := range answer {
		if !slices.Contains(failed, a) {
			untried = append(untried, a)
		}
	}
	return answer, untried
}

// Dial resolves hostport's host and races its addresses (Resolve then
// DialAddrs); Timeout covers both. When the answer was stale and none of
// its addresses connects, the name's current addresses (Reresolve) that
// were not tried are dialled before Dial fails. The port must be numeric or a service
// name known to the system.
func (d *Dialer) Dial(ctx context.Context, hostport string) (*Conn, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	port, err := parsePort(ctx, portStr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	addrs, stale, err := d.ResolveStale(ctx, host)
	if err != nil {
		return nil, err
	}
	c, err := d.dialAddrs(ctx, addrs, port)
	if err == nil || !stale || ctx.Err() != nil {
		return c, err
	}
	// None of a stale answer's addresses took the connection: the name may
	// have moved; its new addresses, if any, are dialled before failing.
	if _, untried := d.Reresolve(ctx, host, addrs); len(untried) > 0 {
		return d.dialAddrs(ctx, untried, port)
	}
	return nil, err
}

// DialAddrs races addrs on port (see the package comment) and returns the
// winning connection with its options applied. Timeout bounds it. It fails
// for an empty addrs without dialing; port 0 is dialed like any other, as
// net.Dialer does, and the system refuses it.
func (d *Dialer) DialAddrs(ctx context.Context, addrs []netip.Addr, port uint16) (*Conn, error) {
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	return d.dialAddrs(ctx, addrs, port)
}

// ErrNoAddresses is returned (inside a *net.OpError) by DialAddrs for an
// empty address list.
var ErrNoAddresses = errors.New("dialer: no addresses to dial")

func parsePort(ctx context.Context, s string) (uint16, error) {
	if n, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(n), nil
	}
	n, err := net.DefaultResolver.LookupPort(ctx, "tcp", s)
	if err != nil {
		return 0, err
	}
	if n <= 0 || n > 65535 {
		return 0, fmt.Errorf("dialer: invalid port %q", s)
	}
	return uint16(n), nil
}

func (d *Dialer) fallbackDelay() time.Duration {
	if d.FallbackDelay == 0 {
		return DefaultFallbackDelay
	}
	return d.FallbackDelay
}

// keepAliveSettings returns the guard settings reproducing Go's keep-alive
// configuration for d.KeepAlive (nil when disabled).
func (d *Dialer) keepAliveSettings() []sockopt.Setting {
	if d.KeepAlive < 0 {
		return nil
	}
	idle := d.KeepAlive
	if idle == 0 {
		idle = defaultKeepAliveIdle
	}
	idleSecs := secondsUp(idle)
	if idleSecs > math.MaxInt32 {
		// No TCP_KEEPIDLE holds it. net.Dialer still turns keep-alive on,
		// then its TCP_KEEPIDLE fails and the rest keep the system's
		// values; a batch the Guard rejects whole would leave it off.
		return []sockopt.Setting{{Option: sockopt.KeepAlive, Value: 1}}
	}
	return []sockopt.Setting{
		{Option: sockopt.KeepAlive, Value: 1},
		{Option: sockopt.KeepIdle, Value: idleSecs},
		{Option: sockopt.KeepInterval, Value: secondsUp(defaultKeepAliveInterval)},
		{Option: sockopt.KeepCount, Value: defaultKeepAliveCount},
	}
}

// secondsUp is d in whole seconds, rounded up; it does not overflow for a
// d near the largest Duration.
func secondsUp(d time.Duration) int {
	secs := int(d / time.Second)
	if d%time.Second > 0 {
		secs++
	}
	return secs
}
