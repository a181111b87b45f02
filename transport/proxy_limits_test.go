package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
)

// TestProxyMaxConnsPerHost: MaxConnsPerHost counts what net/http's
// connection key counts. Forwarded (http) requests through one proxy share
// one key whatever their target, so with a limit of 1 a request to another
// host waits for the proxy connection and then reuses it; CONNECT tunnels
// are keyed by proxy and target, so a tunnel to another host is dialled at
// once. Request A holds its connection until request B has asked for one
// (GetConn): B then either waits (one connection) or dials (two).
func TestProxyMaxConnsPerHost(t *testing.T) {
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			var conns [2]int
			for i, impl := range []string{"nethttp", "ferry"} {
				e := &proxyEnv{t: t, cert: proxyTestCert(t)}
				started, release := make(chan struct{}), make(chan struct{})
				origin := startHandlerServer(t, func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/block" {
						close(started)
						<-release
					}
					io.WriteString(w, "ok")
				}, scheme == "https", e.cert)
				_, port, _ := net.SplitHostPort(origin.hs.Listener.Addr().String())
				p := e.plainProxy()
				rt := proxyTwin(impl, e, proxySettings{Proxy: fixedProxy(p.url("", ""))}, func(nt *http.Transport, ft *Transport) {
					if nt != nil {
						nt.MaxConnsPerHost = 1
					} else {
						ft.MaxConnsPerHost = 1
					}
				})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					getOK(t, rt, context.Background(), fmt.Sprintf("%s://origin.test:%s/block", scheme, port))
				}()
				<-started
				var once sync.Once
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GetConn: func(string) { once.Do(func() { close(release) }) },
				})
				getOK(t, rt, ctx, fmt.Sprintf("%s://other.test:%s/quick", scheme, port))
				wg.Wait()
				closeIdle(rt)
				conns[i] = p.seen().Conns
				if lines := p.seen().Lines; scheme == "https" && (len(lines) != 2 || !strings.HasPrefix(lines[1], "CONNECT other.test:")) {
					t.Fatalf("%s: proxy saw %q", impl, lines)
				}
			}
			want := map[string]int{"http": 1, "https": 2}[scheme]
			if conns[0] != want || conns[1] != want {
				t.Fatalf("connections to the proxy: net/http %d, ferry %d, want %d", conns[0], conns[1], want)
			}
		})
	}
}
