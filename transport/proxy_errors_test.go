package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// closeTrackingBody is a request body that records Close.
type closeTrackingBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeTrackingBody) Close() error {
	b.closed.Store(true)
	return nil
}

// TestProxyErrorsCloseBody: on every proxy failure the request body
// is closed, and the error is of the same kind as net/http's: the hook's
// own error, a "proxyconnect" *net.OpError for failing to reach the proxy
// (dial or TLS to it, not TLS to the target), a certificate error, an
// error whose own Timeout() is true (what *url.Error.Timeout reports).
func TestProxyErrorsCloseBody(t *testing.T) {
	errProxyFunc := errors.New("proxy func failed")
	errHook := errors.New("hook failed")
	cases := []struct {
		name  string
		setup func(e *proxyEnv) (proxySettings, string)
	}{
		{"Proxy func error", func(e *proxyEnv) (proxySettings, string) {
			return proxySettings{Proxy: func(*http.Request) (*url.URL, error) { return nil, errProxyFunc }}, e.target("http", "127.0.0.1", "/")
		}},
		{"proxy unreachable, http target", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(&url.URL{Scheme: "http", Host: e.closedAddr()})
			return s, e.target("http", "origin.test", "/")
		}},
		{"proxy unreachable, https target", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(&url.URL{Scheme: "http", Host: e.closedAddr()})
			return s, e.target("https", "origin.test", "/")
		}},
		{"CONNECT 407", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.authProxy().url(proxyUser, "wrong"))
			return s, e.target("https", "origin.test", "/")
		}},
		{"GetProxyConnectHeader error", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.plainProxy().url("", ""))
			s.GetProxyConnectHeader = func(context.Context, *url.URL, string) (http.Header, error) { return nil, errHook }
			return s, e.target("https", "origin.test", "/")
		}},
		{"OnProxyConnectResponse error", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.plainProxy().url("", ""))
			s.OnProxyConnectResponse = func(context.Context, *url.URL, *http.Request, *http.Response) error { return errHook }
			return s, e.target("https", "origin.test", "/")
		}},
		{"https proxy certificate not valid for its name", func(e *proxyEnv) (proxySettings, string) {
			_, port, _ := net.SplitHostPort(e.httpsProxy().addr)
			s, _ := proxyWith(&url.URL{Scheme: "https", Host: "proxy.test:" + port})
			s.DialContext = dialLoopbackNames
			return s, e.target("https", "origin.test", "/")
		}},
		{"target certificate not valid for the name, through a tunnel", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.plainProxy().url("", ""))
			return s, e.target("https", "unknown.test", "/")
		}},
		{"DialContext fails with a timeout", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.plainProxy().url("", ""))
			s.DialContext = func(context.Context, string, string) (net.Conn, error) { return nil, hookTimeout{} }
			return s, e.target("https", "origin.test", "/")
		}},
		{"socks5 proxy unreachable", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(&url.URL{Scheme: "socks5", Host: e.closedAddr()})
			return s, e.target("http", "origin.test", "/")
		}},
		{"socks5 refused target", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.socksProxy().url("socks5", false))
			return s, "http://" + e.closedAddr() + "/"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var kinds [2]string
			for i, impl := range []string{"nethttp", "ferry"} {
				e := &proxyEnv{t: t, cert: proxyTestCert(t)}
				s, target := tc.setup(e)
				rt := proxyTwin(impl, e, s, nil)
				body := &closeTrackingBody{Reader: strings.NewReader("payload")}
				req, err := http.NewRequest("POST", target, body)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := rt.RoundTrip(req)
				closeIdle(rt)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("%s: want an error, got %s", impl, resp.Status)
				}
				if !body.closed.Load() {
					t.Errorf("%s: request body not closed after %v", impl, err)
				}
				kinds[i] = errKind(err)
				if errors.Is(err, errHook) || errors.Is(err, errProxyFunc) {
					kinds[i] += ", the hook's error"
				}
				var oe *net.OpError
				if errors.As(err, &oe) && oe.Op == "proxyconnect" {
					kinds[i] += ", proxyconnect"
				}
				if te, ok := err.(interface{ Timeout() bool }); ok && te.Timeout() {
					kinds[i] += ", Timeout() itself"
				}
				var ce *tls.CertificateVerificationError
				if errors.As(err, &ce) {
					kinds[i] += ", certificate"
				}
			}
			if kinds[0] != kinds[1] {
				t.Errorf("error kinds differ: net/http %s, ferry %s", kinds[0], kinds[1])
			}
		})
	}
}
