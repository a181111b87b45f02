package transport

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
)

// TestProxyHookURLWithDialTLS: GetProxyConnectHeader and
// OnProxyConnectResponse get the URL the Proxy func returned (the same
// pointer, as in net/http), also when DialTLSContext reaches the https
// proxy.
func TestProxyHookURLWithDialTLS(t *testing.T) {
	for _, impl := range []string{"nethttp", "ferry"} {
		for _, dialTLS := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dialTLS=%v", impl, dialTLS), func(t *testing.T) {
				e := &proxyEnv{t: t, cert: proxyTestCert(t)}
				pu := e.httpsProxy().url(proxyUser, proxySecret)
				var mu sync.Mutex
				var seen []*url.URL
				note := func(u *url.URL) {
					mu.Lock()
					seen = append(seen, u)
					mu.Unlock()
				}
				s := proxySettings{
					Proxy: fixedProxy(pu),
					GetProxyConnectHeader: func(_ context.Context, u *url.URL, _ string) (http.Header, error) {
						note(u)
						return nil, nil
					},
					OnProxyConnectResponse: func(_ context.Context, u *url.URL, _ *http.Request, _ *http.Response) error {
						note(u)
						return nil
					},
				}
				var edit func(*http.Transport, *Transport)
				if dialTLS {
					edit = withDialTLS(e)
				}
				rt := proxyTwin(impl, e, s, edit)
				defer closeIdle(rt)
				getOK(t, rt, context.Background(), e.target("https", "origin.test", "/"))
				if len(seen) != 2 || seen[0] != pu || seen[1] != pu {
					t.Fatalf("hooks saw %v, want the Proxy func's URL %v (same pointer) twice", seen, pu)
				}
			})
		}
	}
}
