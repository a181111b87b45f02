package proxydial

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// outcome reduces a request's result to what a user acts on, so net/http
// and proxydial results can be compared.
func outcome(status int, err error) string {
	if err == nil {
		return fmt.Sprintf("status %d", status)
	}
	var se *StatusError
	if errors.As(err, &se) {
		return fmt.Sprintf("proxy refused %d", se.StatusCode)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "proxyconnect" {
		return "proxy unreachable"
	}
	msg := err.Error()
	for text, code := range nonStandardRefusals {
		if strings.HasSuffix(msg, ": "+text) {
			return fmt.Sprintf("proxy refused %d", code)
		}
	}
	for code := 400; code < 600; code++ { // net/http reports a refused CONNECT by its status text
		if text := http.StatusText(code); text != "" && strings.HasSuffix(msg, ": "+text) {
			return fmt.Sprintf("proxy refused %d", code)
		}
	}
	switch {
	case strings.Contains(msg, "malformed HTTP"):
		return "malformed proxy reply"
	case strings.Contains(msg, "socks connect"):
		return "socks failure"
	case strings.Contains(msg, "tls:"):
		return "tls failure"
	case strings.HasSuffix(msg, "EOF"):
		return "connection closed"
	}
	return "other: " + msg
}

// nonStandardRefusals are status texts real proxies use instead of
// http.StatusText; net/http's error for a refused CONNECT is only the text.
var nonStandardRefusals = map[string]int{
	"Access violation": 403, // tinyproxy, CONNECT to a port not in ConnectPort
}

// netHTTPDiffers holds net/http's outcome for the rows where proxydial
// differs on purpose.
var netHTTPDiffers = map[string]string{
	// net/http drops bytes that arrived with the 200, so its TLS handshake
	// sees the proxy's close; proxydial hands them to TLS, which rejects them.
	"garbage after 200 reaches TLS": "connection closed",
}

type diffCase struct {
	name      string
	proxy     func(t *testing.T) *url.URL
	targetTLS bool
	want      string
}

// TestDifferentialWithNetHTTP sends the same request through the same
// proxy with net/http.Transport{Proxy: ...} and with proxydial plus a
// hand-written request, and expects the same outcome.
func TestDifferentialWithNetHTTP(t *testing.T) {
	srvTLS, _ := proxyTLS(t)
	proxyCert := srvTLS.Certificates[0].Leaf
	if proxyCert == nil {
		var err error
		if proxyCert, err = x509.ParseCertificate(srvTLS.Certificates[0].Certificate[0]); err != nil {
			t.Fatal(err)
		}
	}
	authed := AuthHeader(proxyURL("http", "", true))
	withAddr := func(scheme, addr string, creds bool) *url.URL { return proxyURL(scheme, addr, creds) }
	cases := []diffCase{
		{"http proxy, https target", func(t *testing.T) *url.URL { return withAddr("http", newHTTPProxy(t, "", nil).addr(), false) }, true, "status 200"},
		{"http proxy with auth, https target", func(t *testing.T) *url.URL {
			return withAddr("http", newHTTPProxy(t, authed, nil).addr(), true)
		}, true, "status 200"},
		{"http proxy with auth, http target", func(t *testing.T) *url.URL {
			return withAddr("http", newHTTPProxy(t, authed, nil).addr(), true)
		}, false, "status 200"},
		{"missing credentials, https target", func(t *testing.T) *url.URL {
			return withAddr("http", newHTTPProxy(t, authed, nil).addr(), false)
		}, true, "proxy refused 407"},
		{"https proxy with auth, https target", func(t *testing.T) *url.URL {
			return withAddr("https", newHTTPProxy(t, authed, srvTLS).addr(), true)
		}, true, "status 200"},
		{"https proxy with auth, http target", func(t *testing.T) *url.URL {
			return withAddr("https", newHTTPProxy(t, authed, srvTLS).addr(), true)
		}, false, "status 200"},
		{"malformed CONNECT reply", func(t *testing.T) *url.URL {
			return withAddr("http", newScriptedProxy(t, func(c net.Conn) { io.WriteString(c, "SSH-2.0-x\r\n\r\n") }).addr(), true)
		}, true, "malformed proxy reply"},
		{"garbage after 200 reaches TLS", func(t *testing.T) *url.URL {
			return withAddr("http", newScriptedProxy(t, func(c net.Conn) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\nnot TLS at all\r\n")
				// Half-close and drain: closing with the client's
				// ClientHello unread would make the kernel send a reset,
				// and the client would see ECONNRESET instead of EOF.
				c.(*net.TCPConn).CloseWrite()
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				io.Copy(io.Discard, c)
			}).addr(), true)
		}, true, "tls failure"},
		{"proxy unreachable, https target", func(t *testing.T) *url.URL { return withAddr("http", testpeer.RefusingAddr(t), true) }, true, "proxy unreachable"},
		{"proxy unreachable, http target", func(t *testing.T) *url.URL { return withAddr("http", testpeer.RefusingAddr(t), true) }, false, "proxy unreachable"},
		{"socks5h with auth, https target", func(t *testing.T) *url.URL {
			return withAddr("socks5h", newSOCKSServer(t, testUser, testPassword, 0).addr(), true)
		}, true, "status 200"},
		{"socks5, http target", func(t *testing.T) *url.URL { return withAddr("socks5", newSOCKSServer(t, "", "", 0).addr(), false) }, false, "status 200"},
		{"socks5 failure code", func(t *testing.T) *url.URL { return withAddr("socks5", newSOCKSServer(t, "", "", 2).addr(), false) }, true, "socks failure"},
		{"tinyproxy, https target", func(t *testing.T) *url.URL { return withAddr("http", testpeer.Tinyproxy(t, 0, "", ""), false) }, true, "proxy refused 403"},
		{"tinyproxy, http target", func(t *testing.T) *url.URL { return withAddr("http", testpeer.Tinyproxy(t, 0, "", ""), false) }, false, "status 200"},
		{"dante, https target", func(t *testing.T) *url.URL { return withAddr("socks5h", testpeer.Dante(t), false) }, true, "status 200"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrigin(t, tc.targetTLS)
			pool := x509.NewCertPool()
			pool.AddCert(proxyCert)
			if tc.targetTLS {
				pool.AddCert(o.cert.Leaf)
			}
			pu := tc.proxy(t)
			scheme := "http"
			if tc.targetTLS {
				scheme = "https"
			}
			target := scheme + "://" + o.addr() + "/"

			stdStatus, stdErr := viaNetHTTP(pu, target, pool)
			ourStatus, ourErr := viaProxydial(pu, o.addr(), tc.targetTLS, pool)
			assertNoSecret(t, stdErr)
			assertNoSecret(t, ourErr)
			std, ours := outcome(stdStatus, stdErr), outcome(ourStatus, ourErr)
			wantStd := netHTTPDiffers[tc.name]
			if wantStd == "" {
				wantStd = tc.want
			}
			if std != wantStd || ours != tc.want {
				t.Fatalf("net/http: %s (%v)\nproxydial: %s (%v)\nwant: %s / %s", std, stdErr, ours, ourErr, wantStd, tc.want)
			}
		})
	}
}

func viaNetHTTP(pu *url.URL, target string, pool *x509.CertPool) (int, error) {
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(target)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// viaProxydial is what the transport will do: forward http targets through
// http(s) proxies, tunnel everything else, TLS to https targets inside.
func viaProxydial(pu *url.URL, targetAddr string, targetTLS bool, pool *x509.CertPool) (int, error) {
	ctx := context.Background()
	cfg := &Config{TLSClientConfig: &tls.Config{RootCAs: pool}}
	if !targetTLS && Forwards(pu, "http") {
		conn, err := DialProxy(ctx, pu, cfg)
		if err != nil {
			return 0, err
		}
		code, _, err := getViaForwardingProxy(conn, targetAddr, pu)
		return code, err
	}
	conn, err := Tunnel(ctx, pu, targetAddr, cfg)
	if err != nil {
		return 0, err
	}
	var tcfg *tls.Config
	if targetTLS {
		host, _, _ := net.SplitHostPort(targetAddr)
		tcfg = &tls.Config{RootCAs: pool, ServerName: host}
	}
	code, _, err := getOver(conn, targetAddr, tcfg)
	return code, err
}

// traceLog records the connection-level httptrace events.
type traceLog struct {
	mu     sync.Mutex // guards events
	events []string
}

func (l *traceLog) add(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

func (l *traceLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.events, " | ")
}

func (l *traceLog) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart:          func(i httptrace.DNSStartInfo) { l.add("DNSStart " + i.Host) },
		ConnectStart:      func(network, addr string) { l.add("ConnectStart " + addr) },
		ConnectDone:       func(network, addr string, err error) { l.add(fmt.Sprintf("ConnectDone %s %v", addr, err)) },
		TLSHandshakeStart: func() { l.add("TLSHandshakeStart") },
		TLSHandshakeDone: func(cs tls.ConnectionState, err error) {
			l.add(fmt.Sprintf("TLSHandshakeDone %s %v", cs.ServerName, err))
		},
	}
}

// TestTraceMatchesNetHTTP compares the connect and TLS hooks fired for one
// request through a proxy by net/http and by proxydial (with the target's
// TLS handshake traced by the caller, as the transport will do).
func TestTraceMatchesNetHTTP(t *testing.T) {
	srvTLS, _ := proxyTLS(t)
	cases := []struct {
		name   string
		scheme string
	}{
		{"https proxy", "https"},
		{"http proxy", "http"},
		{"socks5 proxy", "socks5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrigin(t, true)
			pool := x509.NewCertPool()
			pool.AddCert(o.cert.Leaf)
			pool.AddCert(srvTLS.Certificates[0].Leaf)
			var addr string
			switch tc.scheme {
			case "https":
				addr = newHTTPProxy(t, "", srvTLS).addr()
			case "http":
				addr = newHTTPProxy(t, "", nil).addr()
			default:
				addr = newSOCKSServer(t, "", "", 0).addr()
			}
			pu := proxyURL(tc.scheme, addr, false)

			var std traceLog
			tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), std.trace()), "GET", "https://"+o.addr()+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()

			var ours traceLog
			trace := ours.trace()
			ctx := httptrace.WithClientTrace(context.Background(), trace)
			conn, err := Tunnel(ctx, pu, o.addr(), &Config{TLSClientConfig: &tls.Config{RootCAs: pool}})
			if err != nil {
				t.Fatal(err)
			}
			tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
			trace.TLSHandshakeStart()
			err = tc.HandshakeContext(ctx)
			trace.TLSHandshakeDone(tc.ConnectionState(), err)
			tc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if std.String() != ours.String() {
				t.Fatalf("hooks differ\nnet/http:  %s\nproxydial: %s", std.String(), ours.String())
			}
			if !strings.HasPrefix(ours.String(), "ConnectStart "+addr) {
				t.Errorf("ConnectStart should be for the proxy %s: %s", addr, ours.String())
			}
		})
	}
}
