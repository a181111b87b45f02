package proxydial

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"

	"github.com/ferryhttp/ferry/internal/dialer"
)

// ErrNotForwarding is returned by DialProxy for a SOCKS5 proxy: SOCKS
// proxies only tunnel, so use Tunnel.
var ErrNotForwarding = errors.New("proxydial: SOCKS5 proxies do not forward requests; use Tunnel")

// DialProxy returns a connection to the proxy itself: TCP for an http
// proxy, TLS (verified for the proxy host, handshake done) for an https
// proxy. Use it for http targets (see Forwards): requests are then written
// in absolute form with Proxy-Authorization set to AuthHeader(proxyURL).
// httptrace hooks fire as in net/http: ConnectStart/ConnectDone (from
// cfg.Dial) and TLSHandshakeStart/TLSHandshakeDone for the proxy.
//
// Errors: an invalid proxy URL (*UnsupportedSchemeError, ErrNoProxyHost),
// ErrNotForwarding for socks5/socks5h, and a *net.OpError with Op
// "proxyconnect" when the proxy cannot be dialled or its TLS handshake
// fails; the chain keeps the cause (context errors included).
func DialProxy(ctx context.Context, proxyURL *url.URL, cfg *Config) (net.Conn, error) {
	addr, err := Addr(proxyURL)
	if err != nil {
		return nil, err
	}
	s, _ := scheme(proxyURL)
	if s == "socks5" || s == "socks5h" {
		return nil, ErrNotForwarding
	}
	return dialProxy(ctx, proxyURL, s, addr, cfg)
}

// dialProxy dials addr and, for an https proxy, completes TLS with it
// unless cfg.Dial did (cfg.DialsTLS).
func dialProxy(ctx context.Context, proxyURL *url.URL, scheme, addr string, cfg *Config) (net.Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	conn, err := dialTCP(ctx, cfg, addr)
	if err != nil {
		return nil, proxyReachError(addr, err)
	}
	if scheme != "https" || cfg.DialsTLS {
		return conn, nil
	}
	tc, err := handshakeProxyTLS(ctx, conn, proxyURL.Hostname(), cfg)
	if err != nil {
		return nil, proxyConnectError(addr, "TLS handshake with", err)
	}
	return tc, nil
}

func dialTCP(ctx context.Context, cfg *Config, addr string) (net.Conn, error) {
	if cfg.Dial == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	conn, err := cfg.Dial(ctx, "tcp", addr)
	if err == nil && conn == nil {
		err = errors.New("Config.Dial returned (nil, nil)")
	}
	return conn, err
}

// handshakeProxyTLS runs TLS over conn to the proxy, closing conn on
// failure, and fires the httptrace TLS hooks as net/http does.
func handshakeProxyTLS(ctx context.Context, conn net.Conn, host string, cfg *Config) (*tls.Conn, error) {
	var tcfg *tls.Config
	if cfg.TLSClientConfig != nil {
		tcfg = cfg.TLSClientConfig.Clone()
	} else {
		tcfg = &tls.Config{}
	}
	if tcfg.ServerName == "" {
		tcfg.ServerName = host
	}
	tcfg.NextProtos = nil
	return dialer.HandshakeTLS(ctx, conn, tcfg, cfg.TLSHandshakeTimeout)
}
