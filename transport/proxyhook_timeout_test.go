package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// TestProxyHookErrorTimeout: net/http returns the error of
// GetProxyConnectHeader and OnProxyConnectResponse as is, so what an
// http.Client caller's *url.Error.Timeout says is what that error itself
// says, one level: a timeout wrapped by the hook (fmt.Errorf %w) is no
// timeout to it, a cancellation never is. ferry wraps the hook's error and
// must report the same, the cause still reachable with errors.Is.
func TestProxyHookErrorTimeout(t *testing.T) {
	causes := []struct {
		name string
		err  error
		is   error
	}{
		{"deadline", context.DeadlineExceeded, context.DeadlineExceeded},
		{"wrapped deadline", fmt.Errorf("hook gave up: %w", context.DeadlineExceeded), context.DeadlineExceeded},
		{"canceled", context.Canceled, context.Canceled},
		{"wrapped timeout type", fmt.Errorf("hook: %w", hookTimeout{}), hookTimeout{}},
	}
	for _, hook := range []string{"GetProxyConnectHeader", "OnProxyConnectResponse"} {
		for _, c := range causes {
			t.Run(hook+"/"+c.name, func(t *testing.T) {
				var timeout [2]bool
				for i, impl := range []string{"nethttp", "ferry"} {
					e := &proxyEnv{t: t, cert: proxyTestCert(t)}
					s, _ := proxyWith(e.plainProxy().url("", ""))
					if hook == "GetProxyConnectHeader" {
						s.GetProxyConnectHeader = func(context.Context, *url.URL, string) (http.Header, error) { return nil, c.err }
					} else {
						s.OnProxyConnectResponse = func(context.Context, *url.URL, *http.Request, *http.Response) error { return c.err }
					}
					rt := proxyTwin(impl, e, s, nil)
					resp, err := (&http.Client{Transport: rt}).Get(e.target("https", "origin.test", "/"))
					closeIdle(rt)
					if err == nil {
						resp.Body.Close()
						t.Fatalf("%s: want an error", impl)
					}
					if !errors.Is(err, c.is) {
						t.Fatalf("%s: %v does not reach %v", impl, err, c.is)
					}
					ne, ok := err.(net.Error)
					timeout[i] = ok && ne.Timeout()
				}
				if timeout[0] != timeout[1] {
					t.Fatalf("Timeout(): net/http %v, ferry %v", timeout[0], timeout[1])
				}
			})
		}
	}
}

// TestProxyDialErrorTimeout: when the caller's DialContext fails to
// reach the proxy, net/http returns a "proxyconnect" *net.OpError around
// that error, whose Timeout() looks one level down only: a timeout the
// dial hook wrapped is no timeout, a bare one is, a cancellation never is.
func TestProxyDialErrorTimeout(t *testing.T) {
	causes := []struct {
		name string
		err  error
	}{
		{"timeout", hookTimeout{}},
		{"wrapped timeout", fmt.Errorf("dial hook: %w", hookTimeout{})},
		{"wrapped deadline", fmt.Errorf("dial hook: %w", context.DeadlineExceeded)},
		{"canceled", context.Canceled},
	}
	for _, target := range []string{"http", "https"} {
		for _, c := range causes {
			t.Run(target+"/"+c.name, func(t *testing.T) {
				var timeout [2]bool
				for i, impl := range []string{"nethttp", "ferry"} {
					e := &proxyEnv{t: t, cert: proxyTestCert(t)}
					s, _ := proxyWith(e.plainProxy().url("", ""))
					s.DialContext = func(context.Context, string, string) (net.Conn, error) { return nil, c.err }
					rt := proxyTwin(impl, e, s, nil)
					resp, err := (&http.Client{Transport: rt}).Get(e.target(target, "origin.test", "/"))
					closeIdle(rt)
					if err == nil {
						resp.Body.Close()
						t.Fatalf("%s: want an error", impl)
					}
					if !errors.Is(err, c.err) && !errors.Is(err, errors.Unwrap(c.err)) {
						t.Fatalf("%s: %v does not reach the dial error", impl, err)
					}
					var oe *net.OpError
					if !errors.As(err, &oe) || oe.Op != "proxyconnect" {
						t.Fatalf("%s: %v is no proxyconnect *net.OpError", impl, err)
					}
					ne, ok := err.(net.Error)
					timeout[i] = ok && ne.Timeout()
				}
				if timeout[0] != timeout[1] {
					t.Fatalf("Timeout(): net/http %v, ferry %v", timeout[0], timeout[1])
				}
			})
		}
	}
}
