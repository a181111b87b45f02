package transport

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// TestProxyRerouteOnRetry: a request retried after its kept-alive proxy
// connection closed unanswered takes the route the Proxy func gives for
// the retry, as net/http (which asks it for every attempt): another proxy,
// without the first proxy's credentials, or no proxy at all, with an
// origin-form request. The first proxy answers one request per
// connection and closes the second unanswered.
func TestProxyRerouteOnRetry(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	for _, row := range []string{"another_proxy", "direct"} {
		t.Run(row, func(t *testing.T) {
			for _, impl := range []string{"nethttp", "ferry"} {
				e := &proxyEnv{t: t, cert: proxyTestCert(t)}
				first := e.rawProxy(func(c *rawConn) {
					if _, err := c.readRequest(); err != nil {
						return
					}
					io.WriteString(c, ok)
					c.readRequest() // the next request: closed unanswered
				})
				var then *url.URL // the retry's route; nil: direct
				if row == "another_proxy" {
					then = &url.URL{Scheme: "http", Host: e.plainProxy().addr}
				}
				var calls atomic.Int32
				s := proxySettings{
					DialContext: dialLoopbackNames,
					Proxy: func(*http.Request) (*url.URL, error) {
						if calls.Add(1) <= 2 { // the first request, and the second's first attempt
							return first, nil
						}
						return then, nil
					},
				}
				rt := s.transport(impl, tlsTestConfig(e.cert))
				target := e.target("http", "origin.test", "/r")
				for i := 0; i < 2; i++ {
					if got := getOK(t, rt, context.Background(), target); got == "" {
						t.Fatalf("%s: request %d: empty answer", impl, i)
					}
				}
				closeIdle(rt)
				if n := calls.Load(); n != 3 {
					t.Fatalf("%s: Proxy func called %d times, want 3", impl, n)
				}
				if n := e.raw.connCount(); n != 1 {
					t.Fatalf("%s: %d connections to the first proxy, want 1", impl, n)
				}
				if row == "another_proxy" {
					p := e.plain
					p.mu.Lock()
					lines, auths := append([]string(nil), p.lines...), append([][]string(nil), p.auths...)
					p.mu.Unlock()
					if len(lines) != 1 || !strings.HasPrefix(lines[0], "GET http://origin.test:") {
						t.Fatalf("%s: the second proxy saw %q, want one absolute-form GET", impl, lines)
					}
					if len(auths[0]) != 0 {
						t.Fatalf("%s: the second proxy got Proxy-Authorization %q, meant for the first", impl, auths[0])
					}
				} else {
					e.origin.mu.Lock()
					seen := append([]seenRequest(nil), e.origin.seen...)
					e.origin.mu.Unlock()
					if len(seen) != 1 || seen[0].URI != "/r" || seen[0].Header.Get("Proxy-Authorization") != "" {
						t.Fatalf("%s: the origin saw %+v, want one origin-form request without proxy credentials", impl, seen)
					}
				}
			}
		})
	}
}
