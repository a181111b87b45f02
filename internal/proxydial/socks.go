package proxydial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"golang.org/x/net/proxy"
)

// socksTunnel dials the SOCKS5 proxy through cfg.Dial (so connect hooks
// and the transport's DNS apply to the proxy address, as in net/http) and
// runs the SOCKS5 handshake for target on that connection with
// golang.org/x/net/proxy.
func socksTunnel(ctx context.Context, proxyURL *url.URL, scheme, addr, target string, cfg *Config) (net.Conn, error) {
	if scheme == "socks5" && cfg.LookupSOCKS5 != nil {
		resolved, err := resolveTarget(ctx, target, cfg)
		if err != nil {
			return nil, err
		}
		target = resolved
	}
	conn, err := dialTCP(ctx, cfg, addr)
	if err != nil {
		return nil, proxyReachError(addr, err)
	}
	var auth *proxy.Auth
	if u := proxyURL.User; u != nil {
		password, _ := u.Password()
		auth = &proxy.Auth{User: u.Username(), Password: password}
	}
	// The forward dialer hands the SOCKS dialer the connection made above.
	d, err := proxy.SOCKS5("tcp", addr, auth, handOver{conn})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("proxydial: SOCKS5 proxy %s: %w", addr, err)
	}
	cd, ok := d.(proxy.ContextDialer)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("proxydial: SOCKS5 proxy %s: x/net/proxy dialer lacks DialContext", addr)
	}
	hsCtx, cancel := context.WithTimeout(ctx, cfg.connectTimeout())
	defer cancel()
	// On failure the SOCKS dialer closes conn. On success its result only
	// wraps conn (adding the bound address), so conn itself is returned.
	if _, err := cd.DialContext(hsCtx, "tcp", target); err != nil {
		msg := "proxydial: SOCKS5 proxy " + addr + ", target " + target
		if cerr := handshakeCtxErr(hsCtx, err); cerr != nil {
			// Timeout is the context's, not that of the i/o timeout
			// the SOCKS dialer's cancellation deadline caused.
			return nil, &causeError{msg: msg, err: fmt.Errorf("%w (%w)", cerr, err), timeout: isTimeout(cerr)}
		}
		return nil, wrapError(msg, err)
	}
	return conn, nil
}

// handOver is a proxy.ContextDialer that returns one already-dialled
// connection.
type handOver struct{ conn net.Conn }

func (h handOver) Dial(network, addr string) (net.Conn, error) { return h.conn, nil }

func (h handOver) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return h.conn, nil
}

// resolveTarget replaces target's host by an address from cfg.LookupSOCKS5
// (IP literals are kept as they are).
func resolveTarget(ctx context.Context, target string, cfg *Config) (string, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return "", fmt.Errorf("proxydial: SOCKS5 target %q: %w", target, err)
	}
	if ip := net.ParseIP(host); ip != nil {
		return target, nil
	}
	addrs, err := cfg.LookupSOCKS5(ctx, host)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return "", fmt.Errorf("proxydial: resolve SOCKS5 target %s: %w", host, err)
	}
	return net.JoinHostPort(addrs[0].Unmap().String(), port), nil
}

// handshakeCtxErr returns the context's error when it explains the failed
// handshake err. The SOCKS dialer turns the context deadline into a socket
// deadline, so an i/o timeout at or after that deadline is the context's
// DeadlineExceeded even if the context's own timer has not fired yet.
func handshakeCtxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if d, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
