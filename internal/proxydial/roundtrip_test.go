package proxydial

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
)

// proxyURL builds scheme://[user:password@]addr.
func proxyURL(scheme, addr string, withCreds bool) *url.URL {
	u := &url.URL{Scheme: scheme, Host: addr}
	if withCreds {
		u.User = url.UserPassword(testUser, testPassword)
	}
	return u
}

// getOver sends GET / for host over conn (TLS first when tlsCfg is set),
// returns the status and body, and closes conn.
func getOver(conn net.Conn, host string, tlsCfg *tls.Config) (int, string, error) {
	defer conn.Close()
	if tlsCfg != nil {
		tc := tls.Client(conn, tlsCfg)
		if err := tc.Handshake(); err != nil {
			return 0, "", err
		}
		conn = tc
	}
	req, err := http.NewRequest("GET", "http://"+host+"/", nil)
	if err != nil {
		return 0, "", err
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// proxyTLS makes a certificate for an in-process HTTPS proxy and returns
// the server config and a client config trusting it.
func proxyTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	o := newOrigin(t, true) // reuse: only its certificate is needed
	o.srv.Close()
	return &tls.Config{Certificates: []tls.Certificate{o.cert.TLS}}, &tls.Config{RootCAs: o.cert.Pool}
}

// getViaForwardingProxy sends GET / for the http origin at host to the
// proxy on conn in absolute form, with Proxy-Authorization from pu, as the
// transport will; it closes conn.
func getViaForwardingProxy(conn net.Conn, host string, pu *url.URL) (int, string, error) {
	defer conn.Close()
	req, err := http.NewRequest("GET", "http://"+host+"/", nil)
	if err != nil {
		return 0, "", err
	}
	req.Close = true
	if pa := AuthHeader(pu); pa != "" {
		req.Header.Set("Proxy-Authorization", pa)
	}
	if err := req.WriteProxy(conn); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// lookupLocalhost is a LookupSOCKS5 resolver that knows one name.
func lookupLocalhost(ctx context.Context, host string) ([]netip.Addr, error) {
	if host != "localhost" {
		return nil, errors.New("lookupLocalhost: unknown host " + host)
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}
