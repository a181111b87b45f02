package h3conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"sync"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// Dialer makes HTTP/3 connections to Alt-Svc alternatives over one UDP
// socket. Create it with NewDialer; it is safe for concurrent use. Close it
// when done: it owns the socket and every connection it made. The socket
// (and quic-go's goroutines reading it) is released whenever the Dialer
// has no connection and no dial in progress, and opened again (on another
// port) by the next Dial, so an unused Dialer holds nothing.
type Dialer struct {
	cfg Config
	// h3 only builds ClientConns (NewClientConn reads its settings fields);
	// it never round-trips, so it never opens a socket of its own.
	h3 http3.Transport

	closeCtx    context.Context // done once Close starts: aborts dials
	closeCancel context.CancelFunc
	dials       sync.WaitGroup // Dial calls in progress; Close waits for them

	// releasing counts socket releases (releaseIfUnused) between taking
	// the socket and having closed it; Close waits for them, so that
	// nothing is left once it returns. Add happens under mu while closed
	// is false, so before Close's Wait.
	releasing sync.WaitGroup
	// beforeRelease, when set (tests), runs in releaseIfUnused after the
	// socket was taken and before it is closed.
	beforeRelease func()

	mu      sync.Mutex // guards udp, tr, conns, dialing, closed
	udp     *net.UDPConn
	tr      *quic.Transport
	conns   map[*Conn]struct{} // live connections, closed by Close
	dialing int                // Dial calls in progress (keep the socket)
	closed  bool
}

// NewDialer returns a Dialer for cfg (see Config for the zero values). It
// opens no socket until the first Dial.
func NewDialer(cfg Config) *Dialer {
	d := &Dialer{cfg: cfg, conns: make(map[*Conn]struct{})}
	d.h3 = http3.Transport{
		MaxResponseHeaderBytes: cfg.maxHeaderBytes(),
		// gzip is asked for and decoded by Conn (response.go).
		DisableCompression: true,
	}
	d.closeCtx, d.closeCancel = context.WithCancel(context.Background())
	return d
}

// LocalAddr returns the address of the Dialer's UDP socket, or nil when
// none is open: before the first Dial, while the Dialer has no connection
// and no dial in progress, and after Close.
func (d *Dialer) LocalAddr() net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.udp == nil || d.closed {
		return nil
	}
	return d.udp.LocalAddr()
}

// Dial connects to altAddr ("host:port"; an empty host means originHost)
// and completes the QUIC and TLS handshakes, verifying the certificate for
// originHost (a host name or IP literal; a port, if present, is ignored).
// It fires the DNS (default resolver only), connect and TLS httptrace hooks
// of ctx. The dial ends at ctx's end, after Config.HandshakeTimeout, or when
// the Dialer is closed (ErrDialerClosed). Errors name both addresses and wrap
// the cause: a certificate error is a *tls.CertificateVerificationError, a
// cancelled dial keeps context.Canceled / DeadlineExceeded.
func (d *Dialer) Dial(ctx context.Context, originHost, altAddr string) (*Conn, error) {
	origin, host, port, err := splitTarget(originHost, altAddr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, ErrDialerClosed
	}
	d.dials.Add(1)
	d.dialing++
	d.mu.Unlock()
	defer d.dials.Done()
	defer func() {
		d.mu.Lock()
		d.dialing--
		d.mu.Unlock()
		d.releaseIfUnused()
	}()

	tr, err := d.transport()
	if err != nil {
		return nil, err
	}
	if t := d.cfg.handshakeTimeout(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(d.closeCtx, func() { cancel(ErrDialerClosed) })
	defer stop()

	q, err := d.handshake(ctx, tr, origin, host, port)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrDialerClosed) {
			err = ErrDialerClosed
		}
		return nil, fmt.Errorf("h3conn: dial %s for origin %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), origin, err)
	}
	c := newConn(d, q)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		c.Close()
		return nil, ErrDialerClosed
	}
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	c.watchClose()
	return c, nil
}

// handshake resolves host and runs the QUIC handshake.
func (d *Dialer) handshake(ctx context.Context, tr *quic.Transport, origin, host string, port int) (*quic.Conn, error) {
	ip, err := d.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	addr := &net.UDPAddr{IP: ip.AsSlice(), Port: port, Zone: ip.Zone()}
	trace := httptrace.ContextClientTrace(ctx)
	traceConnectStart(trace, addr.String())
	q, err := tr.Dial(ctx, addr, d.cfg.tlsConfig(origin), d.cfg.quicConfig())
	traceConnectDone(trace, addr.String(), q, err)
	return q, err
}

// resolve returns the first address of host (an IP literal as it is).
func (d *Dialer) resolve(ctx context.Context, host string) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap(), nil
	}
	lookup := d.cfg.LookupNetIP
	if lookup == nil {
		lookup = lookupWithTrace
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(addrs) == 0 {
		return netip.Addr{}, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs[0].Unmap(), nil
}

// transport returns the Dialer's quic.Transport, opening the UDP socket on
// first use. The socket is opened outside the lock; a loser of a concurrent
// first use closes its own.
func (d *Dialer) transport() (*quic.Transport, error) {
	d.mu.Lock()
	tr := d.tr
	d.mu.Unlock()
	if tr != nil {
		return tr, nil
	}
	udp, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, fmt.Errorf("h3conn: open UDP socket: %w", err)
	}
	d.mu.Lock()
	if d.closed || d.tr != nil {
		tr, closed := d.tr, d.closed
		d.mu.Unlock()
		udp.Close()
		if closed {
			return nil, ErrDialerClosed
		}
		return tr, nil
	}
	d.udp = udp
	d.tr = &quic.Transport{Conn: udp}
	tr = d.tr
	d.mu.Unlock()
	return tr, nil
}

// forget drops c from the live set (it closed).
func (d *Dialer) forget(c *Conn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	d.releaseIfUnused()
}

// releaseIfUnused closes the UDP socket when no connection and no dial
// uses it; the next Dial opens a new one. Close does the final release.
func (d *Dialer) releaseIfUnused() {
	d.mu.Lock()
	if d.closed || d.tr == nil || d.dialing > 0 || len(d.conns) > 0 {
		d.mu.Unlock()
		return
	}
	tr, udp := d.tr, d.udp
	d.tr, d.udp = nil, nil
	d.releasing.Add(1)
	d.mu.Unlock()
	defer d.releasing.Done()
	if d.beforeRelease != nil {
		d.beforeRelease()
	}
	tr.Close()
	udp.Close()
}

// Close closes every connection the Dialer made (with H3_NO_ERROR, so the
// peers learn it), aborts dials in progress and waits for them, then closes
// the UDP socket (or waits for its release by a connection that just
// closed). Later Dials fail with ErrDialerClosed. Close is idempotent;
// it returns the socket's close error, if any.
func (d *Dialer) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	conns := make([]*Conn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()

	d.closeCancel()
	for _, c := range conns {
		c.Close()
	}
	d.dials.Wait()
	// The last connection may have closed just before: its release of the
	// socket finishes before Close returns.
	d.releasing.Wait()

	d.mu.Lock()
	tr, udp := d.tr, d.udp
	d.tr, d.udp = nil, nil
	d.mu.Unlock()
	if tr == nil {
		return nil
	}
	tr.Close()
	return udp.Close()
}

// splitTarget validates the Dial arguments: the origin host without port or
// brackets, and the host and port to connect to.
func splitTarget(originHost, altAddr string) (origin, host string, port int, err error) {
	origin = originHost
	if h, _, err := net.SplitHostPort(originHost); err == nil {
		origin = h
	} else if len(origin) > 1 && origin[0] == '[' && origin[len(origin)-1] == ']' {
		origin = origin[1 : len(origin)-1]
	}
	if origin == "" {
		return "", "", 0, errors.New("h3conn: empty origin host")
	}
	host, p, err := net.SplitHostPort(altAddr)
	if err != nil {
		return "", "", 0, fmt.Errorf("h3conn: alternative address %q: %w", altAddr, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", "", 0, fmt.Errorf("h3conn: alternative address %q: invalid port", altAddr)
	}
	if host == "" {
		host = origin
	}
	return origin, host, port, nil
}
