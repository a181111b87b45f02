package proxydial

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Tunnel returns a connection to target (host:port) through the proxy: a
// CONNECT tunnel for http and https proxies (TLS to the proxy first for
// https), or a SOCKS5 connection for socks5 and socks5h. The caller then
// speaks to the target as if directly connected (TLS for an https target,
// with ServerName = target host). Bytes the proxy sent after its CONNECT
// response are returned first by the connection's Read.
//
// The CONNECT exchange and the SOCKS5 handshake are bounded by
// cfg.ConnectTimeout (default one minute) as well as by ctx; when either
// expires the connection is closed and the error wraps the context's
// error (context.DeadlineExceeded or context.Canceled).
//
// Errors: those of DialProxy for reaching the proxy; *StatusError for a
// non-200 CONNECT reply; wrapped errors for a malformed or truncated reply,
// a header callback's error, or a SOCKS5 failure (the proxy's reply text,
// e.g. "connection refused", is in the message). A nil cfg is the zero
// Config.
func Tunnel(ctx context.Context, proxyURL *url.URL, target string, cfg *Config) (net.Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	addr, err := Addr(proxyURL)
	if err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("proxydial: tunnel target %q: %w", target, err)
	}
	s, _ := scheme(proxyURL)
	if s == "socks5" || s == "socks5h" {
		return socksTunnel(ctx, proxyURL, s, addr, target, cfg)
	}
	conn, err := dialProxy(ctx, proxyURL, s, addr, cfg)
	if err != nil {
		return nil, err
	}
	return connectTunnel(ctx, conn, proxyURL, addr, target, cfg)
}

// connectHeader builds the CONNECT request's header without modifying the
// caller's maps.
func connectHeader(ctx context.Context, proxyURL *url.URL, target string, cfg *Config) (http.Header, error) {
	var hdr http.Header
	if cfg.GetProxyConnectHeader != nil {
		var err error
		hdr, err = cfg.GetProxyConnectHeader(ctx, proxyURL, target)
		if err != nil {
			return nil, wrapHookError("proxydial: GetProxyConnectHeader", err)
		}
	} else {
		hdr = cfg.ProxyConnectHeader
	}
	if pa := AuthHeader(proxyURL); pa != "" {
		hdr = hdr.Clone()
		if hdr == nil {
			hdr = make(http.Header)
		}
		hdr.Set("Proxy-Authorization", pa)
	} else if hdr == nil {
		hdr = make(http.Header)
	}
	return hdr, nil
}

// aLongTimeAgo is a deadline in the past: setting it interrupts blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// connectTunnel sends CONNECT on conn (which it owns: closed on any error)
// and reads the reply.
func connectTunnel(ctx context.Context, conn net.Conn, proxyURL *url.URL, addr, target string, cfg *Config) (net.Conn, error) {
	hdr, err := connectHeader(ctx, proxyURL, target, cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	// No context on req: Request.Write would fire the caller's httptrace
	// hooks (WroteHeaderField with the Proxy-Authorization credentials,
	// a second WroteRequest) for this request of the transport's own, which
	// net/http writes without them. OnProxyConnectResponse gets it so, too.
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: target},
		Host:   target,
		Header: hdr,
	}

	connectCtx, cancel := context.WithTimeout(ctx, cfg.connectTimeout())
	defer cancel()
	// Cancellation interrupts the blocking write or read by moving the
	// deadline into the past; no goroutine waits on the exchange.
	stop := context.AfterFunc(connectCtx, func() { conn.SetDeadline(aLongTimeAgo) })
	resp, br, err := exchangeConnect(conn, req, cfg.maxHeaderBytes())
	if !stop() {
		conn.Close()
		return nil, wrapError("proxydial: CONNECT "+target+" via proxy "+addr, connectCtx.Err())
	}
	if err != nil {
		conn.Close()
		return nil, wrapError("proxydial: CONNECT "+target+" via proxy "+addr, err)
	}
	if cfg.OnProxyConnectResponse != nil {
		if err := cfg.OnProxyConnectResponse(ctx, proxyURL, req, resp); err != nil {
			conn.Close()
			return nil, wrapHookError("proxydial: OnProxyConnectResponse", err)
		}
	}
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		_, text, _ := strings.Cut(resp.Status, " ")
		return nil, &StatusError{Proxy: addr, Target: target, StatusCode: resp.StatusCode, Status: text, Header: resp.Header}
	}
	if br.Buffered() > 0 {
		early, _ := br.Peek(br.Buffered())
		return &prefixConn{Conn: conn, prefix: append([]byte(nil), early...)}, nil
	}
	return conn, nil
}

// exchangeConnect writes req and reads the response head. A truncated
// reply is reported as io.ErrUnexpectedEOF.
func exchangeConnect(conn net.Conn, req *http.Request, maxHeader int64) (*http.Response, *bufio.Reader, error) {
	if err := req.Write(conn); err != nil {
		return nil, nil, fmt.Errorf("write CONNECT request: %w", err)
	}
	lr := &io.LimitedReader{R: conn, N: maxHeader}
	br := bufio.NewReader(lr)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		if lr.N <= 0 {
			return nil, nil, fmt.Errorf("CONNECT response head exceeds %d bytes", maxHeader)
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, fmt.Errorf("read CONNECT response: %w", err)
	}
	return resp, br, nil
}
