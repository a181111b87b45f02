package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy behaviour that has no net/http twin to compare with (ferry's own
// choices and internals), and leak checks.

func getOK(t *testing.T, rt http.RoundTripper, ctx context.Context, target string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %q %v", resp.StatusCode, body, err)
	}
	return string(body)
}

func roundTripErr(rt http.RoundTripper, target string) error {
	req, _ := http.NewRequest("GET", target, nil)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func TestNewProxyIsProxyFromEnvironment(t *testing.T) {
	got := reflect.ValueOf(New().Proxy).Pointer()
	if want := reflect.ValueOf(http.ProxyFromEnvironment).Pointer(); got != want {
		t.Fatal("New().Proxy is not http.ProxyFromEnvironment (its env cache and localhost rule)")
	}
}

func TestProxyBadURLs(t *testing.T) {
	e := &proxyEnv{t: t, cert: proxyTestCert(t)}
	target := e.target("http", "127.0.0.1", "/")
	cases := []struct {
		name  string
		proxy *url.URL
		is    error
		has   string
	}{
		{"unsupported scheme", &url.URL{Scheme: "ftp", Host: "127.0.0.1:21", User: url.UserPassword(proxyUser, proxySecret)}, ErrProxyNotSupported, `"ftp"`},
		{"no host", &url.URL{Scheme: "http", User: url.UserPassword(proxyUser, proxySecret)}, nil, "no host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Transport{Proxy: http.ProxyURL(tc.proxy)}
			defer tr.CloseIdleConnections()
			err := roundTripErr(tr, target)
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("got %v, want %v containing %q", err, tc.is, tc.has)
			}
			assertNoSecret(t, []error{err})
			e.origin.mu.Lock()
			n := len(e.origin.seen)
			e.origin.mu.Unlock()
			if n != 0 {
				t.Fatalf("the origin was reached directly (%d requests)", n)
			}
		})
	}
}

// TestProxyConnectTimeout: a proxy that never answers CONNECT cannot hang
// a request whose context has no deadline (net/http bounds CONNECT by one
// minute; ferry has the same bound, shortened here).
func TestProxyConnectTimeout(t *testing.T) {
	for _, scheme := range []string{"http", "socks5"} {
		t.Run(scheme, func(t *testing.T) {
			e := &proxyEnv{t: t, cert: proxyTestCert(t)}
			u := e.rawProxy(connectHang)
			u.Scheme = scheme
			tr := &Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsTestConfig(e.cert)}
			tr.proxies.connectTimeout = 50 * time.Millisecond
			defer tr.CloseIdleConnections()
			err := roundTripErr(tr, e.target("https", "origin.test", "/"))
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), u.Host) {
				t.Fatalf("want a DeadlineExceeded naming the proxy, got %v", err)
			}
			assertNoSecret(t, []error{err})
		})
	}
}

// TestProxyAuthorizationReplacesCallers: with credentials in the proxy URL,
// the proxy gets exactly one Proxy-Authorization, from the URL (net/http
// would send the caller's and then its own).
func TestProxyAuthorizationReplacesCallers(t *testing.T) {
	e := &proxyEnv{t: t, cert: proxyTestCert(t)}
	p := e.plainProxy()
	tr := &Transport{Proxy: http.ProxyURL(p.url(proxyUser, proxySecret))}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", e.target("http", "origin.test", "/"), nil)
	req.Header.Set("Proxy-Authorization", "Basic caller")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := p.seen().Auths; !reflect.DeepEqual(got, [][]string{{proxyBasic}}) {
		t.Fatalf("proxy saw Proxy-Authorization %q, want only the URL's", got)
	}
	if got := req.Header.Get("Proxy-Authorization"); got != "Basic caller" {
		t.Fatalf("caller's header changed to %q", got)
	}
}

// TestProxyDialTLSContextReachesHTTPSProxy: as in net/http, DialTLSContext
// dials an https proxy, and is not used for the target behind a tunnel.
func TestProxyDialTLSContextReachesHTTPSProxy(t *testing.T) {
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			e := &proxyEnv{t: t, cert: proxyTestCert(t)}
			p := e.httpsProxy()
			var addrs []string
			var calls atomic.Int32
			dialTLS := func(ctx context.Context, network, addr string) (net.Conn, error) {
				calls.Add(1)
				addrs = append(addrs, e.relabel(addr))
				d := tls.Dialer{Config: tlsTestConfig(e.cert)}
				return d.DialContext(ctx, network, addr) // handshaken
			}
			var rt http.RoundTripper
			if impl == "nethttp" {
				rt = &http.Transport{Proxy: http.ProxyURL(p.url(proxyUser, proxySecret)), DialTLSContext: dialTLS, TLSClientConfig: tlsTestConfig(e.cert)}
			} else {
				rt = &Transport{Proxy: http.ProxyURL(p.url(proxyUser, proxySecret)), DialTLSContext: dialTLS, TLSClientConfig: tlsTestConfig(e.cert)}
			}
			defer closeIdle(rt)
			getOK(t, rt, context.Background(), e.target("http", "origin.test", "/a"))
			getOK(t, rt, context.Background(), e.target("https", "origin.test", "/b"))
			if !reflect.DeepEqual(addrs, []string{"HTTPSPROXY", "HTTPSPROXY"}) {
				t.Fatalf("DialTLSContext called for %q, want the proxy twice", addrs)
			}
			if s := p.seen(); !reflect.DeepEqual(s.Auths, [][]string{{proxyBasic}, {proxyBasic}}) {
				t.Fatalf("proxy saw %+v", s)
			}
		})
	}
}

// TestProxySocketOptionsThroughTunnel: socket options reach the socket to
// the proxy under TLS and tunnel layers, whether ferry or the caller's
// DialContext dialled it.
func TestProxySocketOptionsThroughTunnel(t *testing.T) {
	for _, custom := range []bool{false, true} {
		e := &proxyEnv{t: t, cert: proxyTestCert(t)}
		tr := &Transport{Proxy: http.ProxyURL(e.httpsProxy().url("", "")), TLSClientConfig: tlsTestConfig(e.cert)}
		if custom {
			tr.DialContext = (&net.Dialer{}).DialContext
		}
		ctx := WithSocketOptions(context.Background(), TOS(0x10))
		getOK(t, tr, ctx, e.target("https", "origin.test", "/"))
		getOK(t, tr, ctx, e.target("http", "origin.test", "/"))
		tr.CloseIdleConnections()
	}
}

// TestProxyRouteReuse: the route (key, address, header) is computed once
// for a Proxy func that keeps returning the same URL, and recomputed when
// that URL is changed in place.
func TestProxyRouteReuse(t *testing.T) {
	u := &url.URL{Scheme: "http", Host: "127.0.0.1:3128", User: url.UserPassword("a", "b")}
	tr := &Transport{Proxy: http.ProxyURL(u)}
	req, _ := http.NewRequest("GET", "http://origin.test/", nil)
	r1, err := tr.proxyRouteFor(req)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := tr.proxyRouteFor(req)
	if r1 != r2 {
		t.Fatal("route recomputed for the same URL")
	}
	u.User = url.UserPassword("a", "c")
	r3, _ := tr.proxyRouteFor(req)
	if r3 == r1 || r3.key == r1.key || r3.auth == r1.auth {
		t.Fatal("a URL changed in place kept its old route")
	}
	if allocs := testing.AllocsPerRun(100, func() { tr.proxyRouteFor(req) }); allocs != 0 {
		t.Fatalf("proxyRouteFor allocates %v per request", allocs)
	}
}

// TestProxyNoLeaks: successes and every failure path through proxies leave
// no connection open once idle connections are closed (goroutines are
// checked by goleak in TestMain).
func TestProxyNoLeaks(t *testing.T) {
	e := &proxyEnv{t: t, cert: proxyTestCert(t)}
	plain, auth, hps, socks := e.plainProxy(), e.authProxy(), e.httpsProxy(), e.socksProxy()
	raw := e.rawProxy(connectReply("garbage\r\n\r\n"))
	closed := e.closedAddr()
	e.target("https", "127.0.0.1", "/")
	proxies := []struct {
		u  *url.URL
		ok bool
	}{
		{plain.url("", ""), true}, {auth.url(proxyUser, proxySecret), true}, {hps.url("", ""), true},
		{socks.url("socks5h", false), true}, {auth.url(proxyUser, "bad"), false}, {raw, false},
		{&url.URL{Scheme: "http", Host: closed}, false},
	}
	settle := func() int {
		plain.fwd.CloseIdleConnections()
		auth.fwd.CloseIdleConnections()
		hps.fwd.CloseIdleConnections()
		return countFDs(t)
	}
	// One round first so the servers' lazily created state exists.
	round := func() {
		for _, p := range proxies {
			tr := &Transport{Proxy: http.ProxyURL(p.u), TLSClientConfig: tlsTestConfig(e.cert), ForceAttemptHTTP2: true}
			for _, target := range []string{e.target("http", "origin.test", "/"), e.target("https", "origin.test", "/")} {
				err := roundTripErr(tr, target)
				if p.ok && err != nil {
					t.Errorf("%s via %s: %v", target, e.relabel(p.u.Host), err)
				}
			}
			tr.CloseIdleConnections()
		}
	}
	round()
	base := settle()
	for i := 0; i < 3; i++ {
		round()
	}
	deadline := time.Now().Add(30 * time.Second)
	n := settle()
	for n > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = settle()
	}
	if n > base {
		t.Fatalf("fds: %d before, %d after 3 rounds through proxies; sockets now:\n%s", base, n, e.relabel(openSockets()))
	}
}

// openSockets lists this process's TCP sockets (local -> remote, state)
// from /proc/net/tcp, for failure reports.
func openSockets() string {
	inodes := map[string]bool{}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, ent := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + ent.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	data, _ := os.ReadFile("/proc/net/tcp")
	var out strings.Builder
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && inodes[f[9]] {
			fmt.Fprintf(&out, "%s -> %s state %s\n", hexAddr(f[1]), hexAddr(f[2]), f[3])
		}
	}
	return out.String()
}

func hexAddr(s string) string {
	ip, port, _ := strings.Cut(s, ":")
	var a [4]byte
	for i := 0; i < 4 && len(ip) >= 8; i++ {
		v, _ := strconv.ParseUint(ip[6-2*i:8-2*i], 16, 8)
		a[i] = byte(v)
	}
	p, _ := strconv.ParseUint(port, 16, 16)
	return net.JoinHostPort(net.IP(a[:]).String(), strconv.Itoa(int(p)))
}
