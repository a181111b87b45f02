package transport

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// proxyTwin is net/http's or ferry's Transport (impl "nethttp" or "ferry")
// with the proxy settings s and, when edit is set, its further changes.
func proxyTwin(impl string, e *proxyEnv, s proxySettings, edit func(nt *http.Transport, ft *Transport)) http.RoundTripper {
	rt := s.transport(impl, tlsTestConfig(e.cert))
	if edit != nil {
		if nt, ok := rt.(*http.Transport); ok {
			edit(nt, nil)
		} else {
			edit(nil, rt.(*Transport))
		}
	}
	return rt
}

// TestProxyTraceFullHooks: the full httptrace sequence (header
// fields and WroteRequest included) through proxies matches net/http's.
// The CONNECT request is the transport's own: net/http writes it without
// the caller's trace, so no WroteHeaderField (Proxy-Authorization with the
// credentials among them) or WroteRequest fires for it.
func TestProxyTraceFullHooks(t *testing.T) {
	cases := []struct {
		name  string
		setup func(e *proxyEnv) (proxySettings, string)
	}{
		{"CONNECT with credentials", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.authProxy().url(proxyUser, proxySecret))
			return s, e.target("https", "origin.test", "/")
		}},
		{"CONNECT through https proxy", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.httpsProxy().url("", ""))
			return s, e.target("https", "origin.test", "/")
		}},
		{"forwarded with credentials", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.authProxy().url(proxyUser, proxySecret))
			return s, e.target("http", "origin.test", "/")
		}},
		{"socks5h", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.socksAuthProxy().url("socks5h", true))
			return s, e.target("https", "origin.test", "/")
		}},
		{"DialTLSContext to an https proxy, https target", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.httpsProxy().url(proxyUser, proxySecret))
			return s, e.target("https", "origin.test", "/")
		}},
		{"DialTLSContext to an https proxy, http target", func(e *proxyEnv) (proxySettings, string) {
			s, _ := proxyWith(e.httpsProxy().url(proxyUser, proxySecret))
			return s, e.target("http", "origin.test", "/")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2][]string
			for i, impl := range []string{"nethttp", "ferry"} {
				e := &proxyEnv{t: t, cert: proxyTestCert(t)}
				s, target := tc.setup(e)
				var edit func(*http.Transport, *Transport)
				if strings.HasPrefix(tc.name, "DialTLSContext") {
					edit = withDialTLS(e)
				}
				rt := proxyTwin(impl, e, s, edit)
				rec := &traceRecorder{}
				getOK(t, rt, httptraceWith(context.Background(), rec), target)
				closeIdle(rt)
				got[i] = rec.events()
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Errorf("trace differs\nnet/http: %q\nferry:    %q", got[0], got[1])
			}
		})
	}
}

// withDialTLS sets a DialTLSContext that completes the handshake itself
// (trusting the test certificate) on either transport.
func withDialTLS(e *proxyEnv) func(nt *http.Transport, ft *Transport) {
	f := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: tlsTestConfig(e.cert)}
		return d.DialContext(ctx, network, addr)
	}
	return func(nt *http.Transport, ft *Transport) {
		if nt != nil {
			nt.DialTLSContext = f
		} else {
			ft.DialTLSContext = f
		}
	}
}
