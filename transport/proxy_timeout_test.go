package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestProxyConnectBoundIsTimeout: when ferry's own bound on the
// CONNECT exchange (net/http's one minute, shortened here) or on the SOCKS5
// handshake ends it, the error reports Timeout() itself, as net/http's bare
// context.DeadlineExceeded does: *url.Error.Timeout, which http.Client
// callers test, looks only at the error it wraps, not down its chain.
func TestProxyConnectBoundIsTimeout(t *testing.T) {
	for _, scheme := range []string{"http", "socks5"} {
		t.Run(scheme, func(t *testing.T) {
			e := &proxyEnv{t: t, cert: proxyTestCert(t)}
			u := e.rawProxy(connectHang)
			u.Scheme = scheme
			tr := &Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsTestConfig(e.cert)}
			tr.proxies.connectTimeout = 50 * time.Millisecond
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			req, _ := http.NewRequestWithContext(context.Background(), "GET", e.target("https", "origin.test", "/"), nil)
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("want an error")
			}
			var ue *url.Error
			if !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want a *url.Error wrapping context.DeadlineExceeded, got %v", err)
			}
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				t.Fatalf("err.(net.Error).Timeout() false for %v (net/http: true)", err)
			}
			assertNoSecret(t, []error{err})
		})
	}
}

// hookTimeout is a timeout error a proxy callback returns.
type hookTimeout struct{}

func (hookTimeout) Error() string   { return "hook timed out" }
func (hookTimeout) Timeout() bool   { return true }
func (hookTimeout) Temporary() bool { return true }

// TestProxyHookTimeoutErrors: a timeout error returned by
// GetProxyConnectHeader or OnProxyConnectResponse is still a timeout to an
// http.Client caller (net/http returns it bare; ferry wraps it).
func TestProxyHookTimeoutErrors(t *testing.T) {
	for _, hook := range []string{"GetProxyConnectHeader", "OnProxyConnectResponse"} {
		for _, impl := range []string{"nethttp", "ferry"} {
			t.Run(hook+"/"+impl, func(t *testing.T) {
				e := &proxyEnv{t: t, cert: proxyTestCert(t)}
				s, _ := proxyWith(e.plainProxy().url("", ""))
				if hook == "GetProxyConnectHeader" {
					s.GetProxyConnectHeader = func(context.Context, *url.URL, string) (http.Header, error) { return nil, hookTimeout{} }
				} else {
					s.OnProxyConnectResponse = func(context.Context, *url.URL, *http.Request, *http.Response) error { return hookTimeout{} }
				}
				rt := proxyTwin(impl, e, s, nil)
				defer closeIdle(rt)
				resp, err := (&http.Client{Transport: rt}).Get(e.target("https", "origin.test", "/"))
				if err == nil {
					resp.Body.Close()
					t.Fatal("want an error")
				}
				if ne, ok := err.(net.Error); !errors.Is(err, hookTimeout{}) || !ok || !ne.Timeout() {
					t.Fatalf("want the hook's timeout error, Timeout() true: %v", err)
				}
			})
		}
	}
}
