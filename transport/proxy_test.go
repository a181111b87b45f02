package transport

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http/httpproxy"
)

// Differential proxy tests: every case runs against net/http.Transport and
// ferry's Transport, each with fresh in-process proxies and origins, and
// compares what the client got (status, body, error class, trace), what
// the proxy saw (request lines, Proxy-Authorization, CONNECT headers,
// connections) and what the origin saw (request target, Host, that no
// Proxy-Authorization reached it).

const (
	proxyUser   = "alice"
	proxySecret = "s3cr3t-pw"
)

var proxyBasic = "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+proxySecret))

var proxyCert = sync.OnceValues(func() (*selfsigned.Cert, error) {
	return selfsigned.New("127.0.0.1", "origin.test", "other.test", "localhost")
})

func proxyTestCert(t testing.TB) *selfsigned.Cert {
	c, err := proxyCert()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// proxyEnv starts the servers a case asks for, once each, and names their
// addresses so outcomes compare across runs.
type proxyEnv struct {
	t      *testing.T
	cert   *selfsigned.Cert
	labels [][2]string // address, label

	origin, tlsOrigin  *testServer
	h2Origin           *testServer
	plain, auth, https *testProxy
	socks, socksAuth   *testSOCKS
	raw                *testServer
}

func (e *proxyEnv) label(addr, name string) {
	e.labels = append(e.labels, [2]string{addr, name})
}

// relabel replaces the run's addresses and ports by stable names.
func (e *proxyEnv) relabel(s string) string {
	for _, l := range e.labels {
		s = strings.ReplaceAll(s, l[0], l[1])
		_, port, _ := net.SplitHostPort(l[0])
		s = strings.ReplaceAll(s, ":"+port, ":"+l[1])
	}
	return s
}

func originHandler(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "origin "+r.Method+" "+r.Host+" "+r.RequestURI)
}

func (e *proxyEnv) httpOrigin() *testServer {
	if e.origin == nil {
		e.origin = startHandlerServer(e.t, originHandler, false, e.cert)
		e.label(strings.TrimPrefix(e.origin.URL, "http://"), "ORIGIN")
	}
	return e.origin
}

func (e *proxyEnv) httpsOrigin() *testServer {
	if e.tlsOrigin == nil {
		e.tlsOrigin = startHandlerServer(e.t, originHandler, true, e.cert)
		e.label(strings.TrimPrefix(e.tlsOrigin.URL, "https://"), "TLSORIGIN")
	}
	return e.tlsOrigin
}

// h2Target returns a URL on an https origin that also speaks HTTP/2.
func (e *proxyEnv) h2Target(host, path string) string {
	if e.h2Origin == nil {
		s := &testServer{}
		s.hs = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.record(seenRequest{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone()})
			io.WriteString(w, "origin "+r.Proto+" "+r.Host+" "+r.RequestURI)
		}))
		s.hs.EnableHTTP2 = true
		s.hs.TLS = e.cert.ServerConfig()
		s.hs.Config.ErrorLog = nilLogger()
		s.hs.StartTLS()
		e.t.Cleanup(s.hs.Close)
		e.h2Origin = s
		e.label(s.hs.Listener.Addr().String(), "H2ORIGIN")
	}
	_, port, _ := net.SplitHostPort(e.h2Origin.hs.Listener.Addr().String())
	return "https://" + net.JoinHostPort(host, port) + path
}

// target returns a URL on the http (or https) origin under the name host.
func (e *proxyEnv) target(scheme, host, path string) string {
	srv := e.httpOrigin()
	if scheme == "https" {
		srv = e.httpsOrigin()
	}
	_, port, _ := net.SplitHostPort(srv.hs.Listener.Addr().String())
	return scheme + "://" + net.JoinHostPort(host, port) + path
}

func (e *proxyEnv) plainProxy() *testProxy {
	if e.plain == nil {
		e.plain = startTestProxy(e.t, nil, "")
		e.label(e.plain.addr, "PROXY")
	}
	return e.plain
}

func (e *proxyEnv) authProxy() *testProxy {
	if e.auth == nil {
		e.auth = startTestProxy(e.t, nil, proxyBasic)
		e.label(e.auth.addr, "AUTHPROXY")
	}
	return e.auth
}

func (e *proxyEnv) httpsProxy() *testProxy {
	if e.https == nil {
		e.https = startTestProxy(e.t, e.cert, "")
		e.label(e.https.addr, "HTTPSPROXY")
	}
	return e.https
}

func (e *proxyEnv) socksProxy() *testSOCKS {
	if e.socks == nil {
		e.socks = startTestSOCKS(e.t, "", "", 0)
		e.label(e.socks.addr, "SOCKS")
	}
	return e.socks
}

func (e *proxyEnv) socksAuthProxy() *testSOCKS {
	if e.socksAuth == nil {
		e.socksAuth = startTestSOCKS(e.t, proxyUser, proxySecret, 0)
		e.label(e.socksAuth.addr, "SOCKSAUTH")
	}
	return e.socksAuth
}

// rawProxy is a scripted proxy (one script for every connection).
func (e *proxyEnv) rawProxy(script func(c *rawConn)) *url.URL {
	if e.raw == nil {
		e.raw = startRawServer(e.t, script)
		e.label(strings.TrimPrefix(e.raw.URL, "http://"), "RAWPROXY")
	}
	return &url.URL{Scheme: "http", Host: strings.TrimPrefix(e.raw.URL, "http://"), User: url.UserPassword(proxyUser, proxySecret)}
}

// proxySettings are the fields a case sets on both transports.
type proxySettings struct {
	Proxy                  func(*http.Request) (*url.URL, error)
	DialContext            func(ctx context.Context, network, addr string) (net.Conn, error)
	ProxyConnectHeader     http.Header
	GetProxyConnectHeader  func(ctx context.Context, proxyURL *url.URL, target string) (http.Header, error)
	OnProxyConnectResponse func(ctx context.Context, proxyURL *url.URL, connectReq *http.Request, connectRes *http.Response) error
	ForceAttemptHTTP2      bool
	DisableKeepAlives      bool
}

func (s proxySettings) transport(impl string, tlsCfg *tls.Config) http.RoundTripper {
	if impl == "nethttp" {
		return &http.Transport{
			Proxy: s.Proxy, DialContext: s.DialContext, TLSClientConfig: tlsCfg,
			ProxyConnectHeader: s.ProxyConnectHeader, GetProxyConnectHeader: s.GetProxyConnectHeader,
			OnProxyConnectResponse: s.OnProxyConnectResponse, ForceAttemptHTTP2: s.ForceAttemptHTTP2,
			DisableKeepAlives: s.DisableKeepAlives,
		}
	}
	return &Transport{
		Proxy: s.Proxy, DialContext: s.DialContext, TLSClientConfig: tlsCfg,
		ProxyConnectHeader: s.ProxyConnectHeader, GetProxyConnectHeader: s.GetProxyConnectHeader,
		OnProxyConnectResponse: s.OnProxyConnectResponse, ForceAttemptHTTP2: s.ForceAttemptHTTP2,
		DisableKeepAlives: s.DisableKeepAlives,
	}
}

// proxyCase is one differential row.
type proxyCase struct {
	name string
	// setup starts what the case needs and returns the settings and the
	// URLs to request, one after the other.
	setup    func(e *proxyEnv) (proxySettings, []string)
	mod      func(r *http.Request) // optional, applied to every request
	deadline time.Duration         // optional: the requests' context deadline
	// errHas must be in both transports' error texts.
	errHas string
	// resultsOnly compares only what the client got: net/http dials the
	// proxy before it finds the request unsendable, ferry refuses it first.
	resultsOnly bool
	// traceDiffers skips the trace comparison, for the reason given.
	traceDiffers string
	// check runs on ferry's results only: error identity and what
	// net/http cannot promise.
	check func(t *testing.T, errs []error)
}

// proxyOutcome is everything compared between the two transports.
type proxyOutcome struct {
	Results    []string
	Trace      []string
	Origins    []string // requests as each origin saw them
	OriginAuth []string // Proxy-Authorization values that reached an origin
	Proxies    map[string]proxySeen
	SOCKS      map[string][]string // conns and CONNECT targets per SOCKS server
	RawConns   int
}

func proxyTrace(e *proxyEnv, out *[]string, mu *sync.Mutex) *httptrace.ClientTrace {
	add := func(s string) {
		mu.Lock()
		*out = append(*out, e.relabel(s))
		mu.Unlock()
	}
	return &httptrace.ClientTrace{
		GetConn:           func(hp string) { add("GetConn " + hp) },
		DNSStart:          func(i httptrace.DNSStartInfo) { add("DNSStart " + i.Host) },
		ConnectStart:      func(_, addr string) { add("ConnectStart " + addr) },
		ConnectDone:       func(_, addr string, err error) { add(fmt.Sprintf("ConnectDone %s %v", addr, err != nil)) },
		TLSHandshakeStart: func() { add("TLSHandshakeStart") },
		TLSHandshakeDone: func(cs tls.ConnectionState, err error) {
			add(fmt.Sprintf("TLSHandshakeDone %s %v", cs.ServerName, err != nil))
		},
		GotConn: func(i httptrace.GotConnInfo) { add(fmt.Sprintf("GotConn reused=%v", i.Reused)) },
	}
}

func runProxyCase(t *testing.T, c proxyCase, impl string) (proxyOutcome, []error) {
	e := &proxyEnv{t: t, cert: proxyTestCert(t)}
	set, urls := c.setup(e)
	rt := set.transport(impl, tlsTestConfig(e.cert))
	var out proxyOutcome
	var errs []error
	var mu sync.Mutex
	for _, u := range urls {
		ctx := context.Background()
		if c.deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.deadline)
			defer cancel()
		}
		ctx = httptrace.WithClientTrace(ctx, proxyTrace(e, &out.Trace, &mu))
		req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.mod != nil {
			c.mod(req)
		}
		before := fmt.Sprint(req.Header, req.URL.String(), req.Host)
		resp, err := rt.RoundTrip(req)
		if after := fmt.Sprint(req.Header, req.URL.String(), req.Host); after != before {
			t.Errorf("%s modified the request: %s -> %s", impl, before, after)
		}
		errs = append(errs, err)
		if err != nil {
			if c.errHas != "" && !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("%s error %q lacks %q", impl, err, c.errHas)
			}
			out.Results = append(out.Results, "error class "+errKind(err))
			continue
		}
		body, berr := io.ReadAll(resp.Body)
		resp.Body.Close()
		out.Results = append(out.Results, fmt.Sprintf("%s %d %q tls=%v bodyErr=%v", resp.Proto, resp.StatusCode, e.relabel(string(body)), resp.TLS != nil, berr))
	}
	closeIdle(rt)
	e.waitAccepted(out.Trace)
	for _, o := range []*testServer{e.origin, e.tlsOrigin, e.h2Origin} {
		if o == nil {
			continue
		}
		o.mu.Lock()
		for _, r := range o.seen {
			out.Origins = append(out.Origins, e.relabel(r.Method+" "+r.URI))
			out.OriginAuth = append(out.OriginAuth, r.Header.Values("Proxy-Authorization")...)
		}
		o.mu.Unlock()
	}
	out.Proxies = map[string]proxySeen{}
	for name, p := range map[string]*testProxy{"plain": e.plain, "auth": e.auth, "https": e.https} {
		if p != nil {
			s := p.seen()
			for i := range s.Lines {
				s.Lines[i] = e.relabel(s.Lines[i])
			}
			for _, tags := range s.Tags {
				for i := range tags {
					tags[i] = e.relabel(tags[i])
				}
			}
			out.Proxies[name] = s
		}
	}
	out.SOCKS = map[string][]string{}
	for name, s := range map[string]*testSOCKS{"socks": e.socks, "socksAuth": e.socksAuth} {
		if s != nil {
			n, targets := s.seen()
			for i := range targets {
				targets[i] = e.relabel(targets[i])
			}
			out.SOCKS[name] = append([]string{fmt.Sprint("conns ", n)}, targets...)
		}
	}
	if e.raw != nil {
		e.raw.mu.Lock()
		out.RawConns = e.raw.conns
		e.raw.mu.Unlock()
	}
	return out, errs
}

// waitAccepted waits (boundedly) until each HTTP proxy has accepted as
// many connections as the client's trace says it opened to it: a
// connection the client closes at once may not be accepted yet when the
// request fails.
func (e *proxyEnv) waitAccepted(trace []string) {
	for label, p := range map[string]*testProxy{"PROXY": e.plain, "AUTHPROXY": e.auth, "HTTPSPROXY": e.https} {
		if p == nil {
			continue
		}
		opened := 0
		for _, ev := range trace {
			if ev == "ConnectDone "+label+" false" {
				opened++
			}
		}
		for deadline := time.Now().Add(5 * time.Second); p.seen().Conns < opened && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
}

// fixedProxy is http.ProxyURL.
func fixedProxy(u *url.URL) func(*http.Request) (*url.URL, error) { return http.ProxyURL(u) }

func proxyWith(u *url.URL, urls ...string) (proxySettings, []string) {
	return proxySettings{Proxy: fixedProxy(u)}, urls
}

// assertNoSecret fails when err's text holds the proxy credentials.
func assertNoSecret(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err != nil && (strings.Contains(err.Error(), proxySecret) || strings.Contains(err.Error(), proxyUser)) {
			t.Errorf("error text leaks proxy credentials: %v", err)
		}
	}
}

func wantOneError(t *testing.T, errs []error) error {
	t.Helper()
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("want one error, got %v", errs)
	}
	assertNoSecret(t, errs)
	return errs[0]
}

// Scripts for the raw proxy.
func connectReply(reply string) func(c *rawConn) {
	return func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		io.WriteString(c, reply)
	}
}

func connectHang(c *rawConn) {
	if _, err := c.readRequest(); err != nil {
		return
	}
	<-c.s.close
}

var proxyCases = []proxyCase{
	{
		name: "http target via http proxy: absolute form, one request line per request",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.plainProxy().url("", ""), e.target("http", "origin.test", "/a?b=1"))
		},
	},
	{
		name: "http target via http proxy with credentials: Proxy-Authorization to the proxy only",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.authProxy().url(proxyUser, proxySecret), e.target("http", "origin.test", "/p"))
		},
	},
	{
		name: "forwarding proxy answers 407: a response, not an error",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.authProxy().url(proxyUser, "wrong"), e.target("http", "origin.test", "/p"))
		},
	},
	{
		name: "http targets share one connection to the proxy",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.plainProxy().url("", ""),
				e.target("http", "origin.test", "/1"), e.target("http", "other.test", "/2"),
				e.target("http", "origin.test", "/3"), e.target("http", "127.0.0.1", "/4"))
		},
	},
	{
		name: "caller's Proxy-Authorization goes to a proxy without URL credentials",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.authProxy().url("", ""), e.target("http", "origin.test", "/"))
		},
		mod: func(r *http.Request) { r.Header.Set("Proxy-Authorization", proxyBasic) },
	},
	{
		name: "https target via CONNECT with credentials: origin sees no proxy header",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.authProxy().url(proxyUser, proxySecret), e.target("https", "origin.test", "/x?y"), e.target("https", "origin.test", "/z"))
		},
	},
	{
		name: "https targets: one tunnel per target",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.plainProxy().url("", ""),
				e.target("https", "origin.test", "/1"), e.target("https", "other.test", "/2"), e.target("https", "origin.test", "/3"))
		},
	},
	{
		name: "ProxyConnectHeader is sent with CONNECT",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			s, urls := proxyWith(e.plainProxy().url("", ""), e.target("https", "origin.test", "/"))
			s.ProxyConnectHeader = http.Header{"X-Proxy-Tag": {"static"}}
			return s, urls
		},
	},
	{
		name: "GetProxyConnectHeader replaces ProxyConnectHeader",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			s, urls := proxyWith(e.plainProxy().url("", ""), e.target("https", "origin.test", "/"))
			s.ProxyConnectHeader = http.Header{"X-Proxy-Tag": {"static"}}
			s.GetProxyConnectHeader = func(ctx context.Context, u *url.URL, target string) (http.Header, error) {
				return http.Header{"X-Proxy-Tag": {"dynamic " + target}}, nil
			}
			return s, urls
		},
	},
	{
		name:   "GetProxyConnectHeader error fails the request",
		errHas: "no header today",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			s, urls := proxyWith(e.plainProxy().url("", ""), e.target("https", "origin.test", "/"))
			s.GetProxyConnectHeader = func(context.Context, *url.URL, string) (http.Header, error) {
				return nil, errNoHeader
			}
			return s, urls
		},
		check: func(t *testing.T, errs []error) {
			if err := wantOneError(t, errs); !errors.Is(err, errNoHeader) {
				t.Errorf("want errors.Is(err, errNoHeader): %v", err)
			}
		},
	},
	{
		name:   "OnProxyConnectResponse sees the 200 and can refuse it",
		errHas: "refused by hook 200",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			s, urls := proxyWith(e.plainProxy().url("", ""), e.target("https", "origin.test", "/"))
			s.OnProxyConnectResponse = func(ctx context.Context, u *url.URL, req *http.Request, resp *http.Response) error {
				return fmt.Errorf("refused by hook %d %s", resp.StatusCode, req.Host)
			}
			return s, urls
		},
	},
	{
		name:   "CONNECT answered 407: the error says so and hides the credentials",
		errHas: "Proxy Authentication Required",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.authProxy().url(proxyUser, "not-"+proxySecret), e.target("https", "origin.test", "/"))
		},
		check: func(t *testing.T, errs []error) {
			var se *ProxyStatusError
			if err := wantOneError(t, errs); !errors.As(err, &se) || se.StatusCode != 407 || se.Header.Get("Proxy-Authenticate") == "" {
				t.Errorf("want a *ProxyStatusError 407 with Proxy-Authenticate: %v", err)
			}
		},
	},
	{
		name: "proxy unreachable: proxyconnect error",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(&url.URL{Scheme: "http", Host: e.closedAddr(), User: url.UserPassword(proxyUser, proxySecret)},
				e.target("http", "origin.test", "/"))
		},
		errHas: "proxyconnect",
		check: func(t *testing.T, errs []error) {
			var oe *net.OpError
			if err := wantOneError(t, errs); !errors.As(err, &oe) || oe.Op != "proxyconnect" {
				t.Errorf("want *net.OpError proxyconnect: %v", err)
			}
		},
	},
	{
		name: "https target, proxy unreachable: proxyconnect error",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(&url.URL{Scheme: "http", Host: e.closedAddr()}, e.target("https", "origin.test", "/"))
		},
		errHas: "proxyconnect",
	},
	{
		name:   "malformed CONNECT reply",
		errHas: "malformed HTTP",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.rawProxy(connectReply("garbage\r\n\r\n")), e.target("https", "origin.test", "/"))
		},
		check: func(t *testing.T, errs []error) { wantOneError(t, errs) },
	},
	{
		name: "truncated CONNECT reply",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.rawProxy(connectReply("HTTP/1.1 200 OK\r\nX-Half: ")), e.target("https", "origin.test", "/"))
		},
		check: func(t *testing.T, errs []error) {
			if err := wantOneError(t, errs); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("want io.ErrUnexpectedEOF in the chain: %v", err)
			}
		},
	},
	{
		name:     "CONNECT never answered: the request deadline ends it",
		deadline: 200 * time.Millisecond,
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.rawProxy(connectHang), e.target("https", "origin.test", "/"))
		},
		check: func(t *testing.T, errs []error) {
			if err := wantOneError(t, errs); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("want context.DeadlineExceeded: %v", err)
			}
		},
	},
	{
		name:   "CONNECT refused with a body: the status text, the body unread",
		errHas: "Forbidden",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.rawProxy(connectReply("HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nno tunnel")), e.target("https", "origin.test", "/"))
		},
		check: func(t *testing.T, errs []error) {
			var se *ProxyStatusError
			if err := wantOneError(t, errs); !errors.As(err, &se) || se.StatusCode != 403 {
				t.Errorf("want a *ProxyStatusError 403: %v", err)
			}
		},
	},
	{
		name: "CONNECT answered 200, then the proxy closes the tunnel",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.rawProxy(connectReply("HTTP/1.1 200 Connection established\r\n\r\n")), e.target("https", "origin.test", "/"))
		},
		check: func(t *testing.T, errs []error) { wantOneError(t, errs) },
	},
	{
		name: "DisableKeepAlives: a connection to the proxy, or a tunnel, per request",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			s, urls := proxyWith(e.plainProxy().url("", ""),
				e.target("http", "origin.test", "/1"), e.target("http", "other.test", "/2"),
				e.target("https", "origin.test", "/3"), e.target("https", "origin.test", "/4"))
			s.DisableKeepAlives = true
			return s, urls
		},
	},
	{
		name: "https proxy, http target: forwarding over TLS to the proxy",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.httpsProxy().url("", ""), e.target("http", "origin.test", "/a"), e.target("http", "other.test", "/b"))
		},
	},
	{
		name: "HTTP/2 negotiated inside a CONNECT tunnel",
		traceDiffers: "on a reused HTTP/2 connection net/http's GetConn names the target " +
			"(from its HTTP/2 pool), ferry's the proxy, as for every other proxied request",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			s, urls := proxyWith(e.plainProxy().url("", ""), e.h2Target("origin.test", "/h2"), e.h2Target("origin.test", "/again"))
			s.ForceAttemptHTTP2 = true
			return s, urls
		},
	},
	{
		name: "HTTP/2 inside TLS inside TLS (https proxy)",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			s, urls := proxyWith(e.httpsProxy().url("", ""), e.h2Target("origin.test", "/h2"))
			s.ForceAttemptHTTP2 = true
			return s, urls
		},
	},
	{
		name: "https proxy, https target: TLS inside TLS",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.httpsProxy().url(proxyUser, proxySecret), e.target("https", "origin.test", "/nested"))
		},
	},
	{
		name: "socks5, http target: origin form, the proxy gets the name",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.socksProxy().url("socks5", false), e.target("http", "origin.test", "/s?q"), e.target("http", "origin.test", "/t"))
		},
	},
	{
		name: "socks5h with user and password, https target",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.socksAuthProxy().url("socks5h", true), e.target("https", "origin.test", "/h"))
		},
	},
	{
		name: "socks5 wrong password",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			u := e.socksAuthProxy().url("socks5", false)
			u.User = url.UserPassword(proxyUser, "nope-"+proxySecret)
			return proxyWith(u, e.target("http", "origin.test", "/"))
		},
		check: func(t *testing.T, errs []error) { wantOneError(t, errs) },
	},
	{
		name:   "socks5 failure code is reported",
		errHas: "connection refused",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			// The target port is closed: the SOCKS server answers 5.
			return proxyWith(e.socksProxy().url("socks5", false), "http://"+e.closedAddr()+"/")
		},
		check: func(t *testing.T, errs []error) { wantOneError(t, errs) },
	},
	{
		name:   "Proxy func error is returned",
		errHas: "no route for you",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxySettings{Proxy: func(*http.Request) (*url.URL, error) { return nil, errNoRoute }}, []string{e.target("http", "127.0.0.1", "/")}
		},
		check: func(t *testing.T, errs []error) {
			if err := wantOneError(t, errs); !errors.Is(err, errNoRoute) {
				t.Errorf("want errNoRoute itself: %v", err)
			}
		},
	},
	{
		name: "nil proxy URL: direct",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			e.plainProxy()
			return proxySettings{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }}, []string{e.target("http", "127.0.0.1", "/d")}
		},
	},
	{
		name:        "invalid Host header is refused for a forwarding proxy",
		errHas:      "invalid Host header",
		resultsOnly: true,
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.plainProxy().url("", ""), e.target("http", "origin.test", "/"))
		},
		mod: func(r *http.Request) { r.Host = "bad host" },
	},
	{
		name: "credentials per request: different users never share a connection",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			p := e.plainProxy()
			return proxySettings{Proxy: func(r *http.Request) (*url.URL, error) {
					return p.url(r.URL.Query().Get("user"), "pw"), nil
				}}, []string{
					e.target("http", "origin.test", "/?user=a"), e.target("http", "origin.test", "/?user=b"),
					e.target("http", "origin.test", "/?user=a"), e.target("https", "origin.test", "/?user=a"),
					e.target("https", "origin.test", "/?user=b"), e.target("https", "origin.test", "/?user=b"),
				}
		},
	},
	{
		name: "direct and proxied requests to one origin never share a connection",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			p := e.plainProxy()
			return proxySettings{
					Proxy: func(r *http.Request) (*url.URL, error) {
						if r.URL.Query().Has("via") {
							return p.url("", ""), nil
						}
						return nil, nil
					},
					DialContext: dialLoopbackNames,
				}, []string{
					e.target("https", "origin.test", "/a?via"), e.target("https", "origin.test", "/b"),
					e.target("https", "origin.test", "/c?via"), e.target("https", "origin.test", "/d"),
					e.target("http", "origin.test", "/e?via"), e.target("http", "origin.test", "/f"),
					e.target("http", "origin.test", "/g?via"), e.target("http", "origin.test", "/h"),
				}
		},
	},
	{
		name: "IDN target via an http proxy: absolute form and CONNECT in punycode",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.plainProxy().url("", ""), e.target("http", "bücher.test", "/idn"), e.target("https", "bücher.test", "/idn"))
		},
	},
	{
		name: "IDN target via socks5: the proxy gets the punycode name",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			return proxyWith(e.socksProxy().url("socks5", false), e.target("http", "bücher.test", "/idn"))
		},
	},
	{
		name: "proxy host name resolved lazily by the transport",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			_, port, _ := net.SplitHostPort(e.plainProxy().addr)
			return proxyWith(&url.URL{Scheme: "http", Host: "localhost:" + port}, e.target("http", "origin.test", "/"))
		},
	},
	{
		name: "environment selection: HTTP_PROXY, HTTPS_PROXY, NO_PROXY, loopback exception",
		setup: func(e *proxyEnv) (proxySettings, []string) {
			cfg := httpproxy.Config{
				HTTPProxy:  e.plainProxy().url("", "").String(),
				HTTPSProxy: e.authProxy().url(proxyUser, proxySecret).String(),
				NoProxy:    "direct.test",
			}
			f := cfg.ProxyFunc()
			return proxySettings{
					Proxy:       func(r *http.Request) (*url.URL, error) { return f(r.URL) },
					DialContext: dialLoopbackNames,
				}, []string{
					e.target("http", "origin.test", "/via-http-proxy"),
					e.target("https", "origin.test", "/via-https-proxy"),
					e.target("http", "direct.test", "/no-proxy"),
					e.target("http", "127.0.0.1", "/loopback"),
				}
		},
	},
}

var (
	errNoHeader = errors.New("no header today")
	errNoRoute  = errors.New("no route for you")
)

// closedAddr returns a loopback address that refuses connections.
func (e *proxyEnv) closedAddr() string {
	addr := testpeer.RefusingAddr(e.t)
	e.label(addr, "CLOSED")
	return addr
}

func TestProxyDifferential(t *testing.T) {
	for _, c := range proxyCases {
		t.Run(c.name, func(t *testing.T) {
			std, stdErrs := runProxyCase(t, c, "nethttp")
			fer, ferErrs := runProxyCase(t, c, "ferry")
			t.Logf("ferry: %+v", fer)
			if c.traceDiffers != "" {
				t.Logf("trace not compared: %s\nnet/http: %q\nferry:    %q", c.traceDiffers, std.Trace, fer.Trace)
				std.Trace, fer.Trace = nil, nil
			}
			if c.resultsOnly {
				if !reflect.DeepEqual(std.Results, fer.Results) {
					t.Errorf("results differ\nnet/http: %q\nferry:    %q", std.Results, fer.Results)
				}
			} else if !reflect.DeepEqual(std, fer) {
				t.Errorf("outcomes differ\nnet/http: %+v\nferry:    %+v", std, fer)
			}
			for i := range stdErrs {
				if (stdErrs[i] == nil) != (ferErrs[i] == nil) {
					continue // already reported through Results
				}
				if stdErrs[i] != nil {
					t.Logf("errors: net/http %q; ferry %q", stdErrs[i], ferErrs[i])
				}
			}
			assertNoSecret(t, ferErrs)
			if len(fer.OriginAuth) != 0 {
				t.Errorf("Proxy-Authorization reached the origin: %q", fer.OriginAuth)
			}
			if c.check != nil {
				c.check(t, ferErrs)
			}
		})
	}
}

// TestProxyExpectations pins what the differential rows must show (so a
// shared bug in both transports, or in the test proxies, cannot pass).
func TestProxyExpectations(t *testing.T) {
	find := func(name string) proxyCase {
		for _, c := range proxyCases {
			if strings.HasPrefix(c.name, name) {
				return c
			}
		}
		t.Fatalf("no case %q", name)
		return proxyCase{}
	}
	cases := []struct {
		row  string
		want func(o proxyOutcome) bool
	}{
		{"http target via http proxy:", func(o proxyOutcome) bool {
			return reflect.DeepEqual(o.Proxies["plain"].Lines, []string{"GET http://origin.test:ORIGIN/a?b=1"}) &&
				reflect.DeepEqual(o.Origins, []string{"GET /a?b=1"})
		}},
		{"http target via http proxy with credentials", func(o proxyOutcome) bool {
			return reflect.DeepEqual(o.Proxies["auth"].Auths, [][]string{{proxyBasic}}) && strings.HasPrefix(o.Results[0], "HTTP/1.1 200 ")
		}},
		{"forwarding proxy answers 407", func(o proxyOutcome) bool { return strings.HasPrefix(o.Results[0], "HTTP/1.1 407 ") }},
		{"http targets share one connection", func(o proxyOutcome) bool {
			return o.Proxies["plain"].Conns == 1 && len(o.Origins) == 4
		}},
		{"https target via CONNECT with credentials", func(o proxyOutcome) bool {
			return reflect.DeepEqual(o.Proxies["auth"].Lines, []string{"CONNECT origin.test:TLSORIGIN"}) &&
				reflect.DeepEqual(o.Proxies["auth"].Auths, [][]string{{proxyBasic}}) &&
				reflect.DeepEqual(o.Origins, []string{"GET /x?y", "GET /z"}) && strings.Contains(o.Results[0], "tls=true")
		}},
		{"https targets: one tunnel per target", func(o proxyOutcome) bool { return o.Proxies["plain"].Conns == 2 }},
		{"GetProxyConnectHeader replaces", func(o proxyOutcome) bool {
			return reflect.DeepEqual(o.Proxies["plain"].Tags, [][]string{{"dynamic origin.test:TLSORIGIN"}})
		}},
		{"DisableKeepAlives: a connection", func(o proxyOutcome) bool {
			return o.Proxies["plain"].Conns == 4 && len(o.Origins) == 4
		}},
		{"CONNECT answered 200, then", func(o proxyOutcome) bool {
			return o.RawConns == 1 && o.Results[0] == "error class error"
		}},
		{"https proxy, http target", func(o proxyOutcome) bool {
			return o.Proxies["https"].Conns == 1 && strings.Contains(o.Results[1], "tls=true")
		}},
		{"HTTP/2 negotiated inside a CONNECT tunnel", func(o proxyOutcome) bool {
			return len(o.Results) == 2 && strings.HasPrefix(o.Results[0], "HTTP/2.0 200") &&
				strings.HasPrefix(o.Results[1], "HTTP/2.0 200") && o.Proxies["plain"].Conns == 1
		}},
		{"HTTP/2 inside TLS inside TLS", func(o proxyOutcome) bool { return strings.HasPrefix(o.Results[0], "HTTP/2.0 200") }},
		{"https proxy, https target", func(o proxyOutcome) bool {
			return reflect.DeepEqual(o.Origins, []string{"GET /nested"}) && strings.HasPrefix(o.Results[0], "HTTP/1.1 200 ")
		}},
		{"socks5, http target", func(o proxyOutcome) bool {
			return reflect.DeepEqual(o.SOCKS["socks"], []string{"conns 1", "origin.test:ORIGIN"}) &&
				reflect.DeepEqual(o.Origins, []string{"GET /s?q", "GET /t"})
		}},
		{"socks5h with user and password", func(o proxyOutcome) bool { return strings.HasPrefix(o.Results[0], "HTTP/1.1 200 ") }},
		{"nil proxy URL", func(o proxyOutcome) bool { return o.Proxies["plain"].Conns == 0 && len(o.Origins) == 1 }},
		{"credentials per request", func(o proxyOutcome) bool { return o.Proxies["plain"].Conns == 4 }},
		{"proxy host name resolved lazily", func(o proxyOutcome) bool {
			return len(o.Trace) > 1 && o.Trace[0] == "GetConn localhost:PROXY" && o.Trace[1] == "DNSStart localhost"
		}},
		{"environment selection", func(o proxyOutcome) bool {
			return reflect.DeepEqual(o.Proxies["plain"].Lines, []string{"GET http://origin.test:ORIGIN/via-http-proxy"}) &&
				reflect.DeepEqual(o.Proxies["auth"].Lines, []string{"CONNECT origin.test:TLSORIGIN"}) &&
				len(o.Origins) == 4
		}},
	}
	for _, tc := range cases {
		t.Run(tc.row, func(t *testing.T) {
			o, errs := runProxyCase(t, find(tc.row), "ferry")
			if !tc.want(o) {
				t.Errorf("unexpected outcome: %+v (errors %v)", o, errs)
			}
		})
	}
}
