package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// Real proxy servers, started on loopback by the test with a generated
// configuration and stopped after it: tinyproxy (forwarding and CONNECT,
// Basic auth) and dante (SOCKS5). Each case runs through net/http and
// ferry and must give the same outcome. A missing binary skips, except
// under CI=true where it fails.

// realOutcome is what one request through a real proxy gave.
type realOutcome struct {
	Result     string
	OriginSaw  []string // method, request target, Host
	OriginAuth []string
}

func realRoundTrip(t *testing.T, impl string, e *proxyEnv, proxy *url.URL, target string) realOutcome {
	var rt http.RoundTripper = &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: tlsTestConfig(e.cert), ForceAttemptHTTP2: true}
	if impl == "ferry" {
		rt = &Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: tlsTestConfig(e.cert), ForceAttemptHTTP2: true}
	}
	defer closeIdle(rt)
	var out realOutcome
	for _, o := range []*testServer{e.origin, e.tlsOrigin, e.h2Origin} {
		if o != nil {
			o.mu.Lock()
			o.seen = nil
			o.mu.Unlock()
		}
	}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", target, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		out.Result = "error " + errKind(err)
		assertNoSecret(t, []error{err})
		t.Logf("%s: %v", impl, err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out.Result = fmt.Sprintf("%s %d %q", resp.Proto, resp.StatusCode, e.relabel(string(body)))
	}
	for _, o := range []*testServer{e.origin, e.tlsOrigin, e.h2Origin} {
		if o == nil {
			continue
		}
		o.mu.Lock()
		for _, r := range o.seen {
			out.OriginSaw = append(out.OriginSaw, e.relabel(r.Method+" "+r.URI))
			out.OriginAuth = append(out.OriginAuth, r.Header.Values("Proxy-Authorization")...)
		}
		o.mu.Unlock()
	}
	return out
}

func TestRealProxies(t *testing.T) {
	e := &proxyEnv{t: t, cert: proxyTestCert(t)}
	plainTarget := e.target("http", "127.0.0.1", "/plain?x=1")
	tlsTarget := e.target("https", "127.0.0.1", "/tls")
	h2Target := e.h2Target("127.0.0.1", "/h2")
	_, tlsPort, _ := net.SplitHostPort(e.tlsOrigin.hs.Listener.Addr().String())
	_, h2Port, _ := net.SplitHostPort(e.h2Origin.hs.Listener.Addr().String())

	type row struct {
		name   string
		proxy  *url.URL
		target string
		want   string // prefix of ferry's Result
	}
	run := func(t *testing.T, rows []row) {
		for _, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				std := realRoundTrip(t, "nethttp", e, r.proxy, r.target)
				fer := realRoundTrip(t, "ferry", e, r.proxy, r.target)
				if !reflect.DeepEqual(std, fer) {
					t.Errorf("outcomes differ\nnet/http: %+v\nferry:    %+v", std, fer)
				}
				if !strings.HasPrefix(fer.Result, r.want) {
					t.Errorf("ferry got %q, want %q...", fer.Result, r.want)
				}
				if len(fer.OriginAuth) != 0 {
					t.Errorf("Proxy-Authorization reached the origin: %q", fer.OriginAuth)
				}
			})
		}
	}
	withUser := func(addr, user, pass string) *url.URL {
		u := &url.URL{Scheme: "http", Host: addr}
		if user != "" {
			u.User = url.UserPassword(user, pass)
		}
		return u
	}
	t.Run("tinyproxy", func(t *testing.T) {
		var p, p2 int
		fmt.Sscan(tlsPort, &p)
		fmt.Sscan(h2Port, &p2)
		tiny, tinyH2 := testpeer.Tinyproxy(t, p, proxyUser, proxySecret), testpeer.Tinyproxy(t, p2, proxyUser, proxySecret)
		run(t, []row{
			{"http target forwarded with credentials", withUser(tiny, proxyUser, proxySecret), plainTarget, "HTTP/1.1 200"},
			{"https target through CONNECT", withUser(tiny, proxyUser, proxySecret), tlsTarget, "HTTP/1.1 200"},
			{"HTTP/2 inside CONNECT", withUser(tinyH2, proxyUser, proxySecret), h2Target, "HTTP/2.0 200"},
			{"forwarding without credentials is 407", withUser(tiny, "", ""), plainTarget, "HTTP/1.0 407"},
			{"CONNECT without credentials fails", withUser(tiny, "", ""), tlsTarget, "error error"},
			{"wrong password", withUser(tiny, proxyUser, "x"+proxySecret), tlsTarget, "error error"},
		})
	})
	t.Run("dante", func(t *testing.T) {
		dante := testpeer.Dante(t)
		run(t, []row{
			{"socks5: http target", &url.URL{Scheme: "socks5", Host: dante}, plainTarget, "HTTP/1.1 200"},
			{"socks5h: https target by name", &url.URL{Scheme: "socks5h", Host: dante}, strings.Replace(tlsTarget, "127.0.0.1", "localhost", 1), "HTTP/1.1 200"},
			{"socks5: HTTP/2 target", &url.URL{Scheme: "socks5", Host: dante}, h2Target, "HTTP/2.0 200"},
		})
	})
}
