package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInstallRegisteredPrograms runs testdata/adoptregistered, a program
// doing what real programs do with http.DefaultTransport, once with ferry
// installed and once without (Install changes process-global state, so it
// runs in child processes). Every line but ferry's Stats must be the same
// in both runs, except the known differences listed per scenario; the
// Stats lines say which requests ferry served; nothing is logged.
func TestInstallRegisteredPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	bin := filepath.Join(t.TempDir(), "adoptregistered")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/adoptregistered").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tests := []struct {
		scenario string
		// ferry lists the Stats lines the run with ferry must print.
		ferry []string
		// differs lists lines that are known to differ: without ferry,
		// with ferry.
		differs [][2]string
	}{
		{
			// The assertion holds, a Clone is plain net/http (HTTP/2 to
			// an HTTP/2 server, not counted by ferry) with a non-nil
			// TLSClientConfig.
			scenario: "assert-clone",
			ferry:    []string{"ferry after-default-client h1=1 h2=0", "ferry after-clone h1=1 h2=0"},
		},
		{
			// After the program assigns TLSClientConfig, then Proxy, its
			// requests are declined to net/http, which applies them.
			scenario: "mutate",
			ferry: []string{
				"ferry before-change h1=1 h2=0",
				"ferry after-tls-change h1=1 h2=0",
				"ferry after-proxy-change h1=1 h2=0",
			},
		},
		{
			// A TLS config set before the first request: the request is
			// declined to net/http, which cannot use its HTTP/2 on a
			// transport with "https" registered (see Install).
			scenario: "tls-before-first-request",
			ferry:    []string{"ferry after-https h1=0 h2=0"},
			differs: [][2]string{{
				`https-first-request 200 HTTP/2.0 "HTTP/2.0 /b" <nil>`,
				`https-first-request 200 HTTP/1.1 "HTTP/1.1 /b" <nil>`,
			}},
		},
		{
			// http.Get and clients with a nil Transport (one with a
			// Timeout that expires) go through ferry; the default
			// transport's CloseIdleConnections closes ferry's.
			scenario: "get-and-timeout",
			ferry: []string{
				"ferry after-get h1=1 h2=0",
				"ferry after-timeout-client h1=2 h2=0",
				"ferry idle-before-close-idle 1",
				"ferry idle-after-close-idle 0",
			},
		},
	}
	run := func(t *testing.T, args ...string) (lines []string, stderr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "HTTP_PROXY=", "http_proxy=", "HTTPS_PROXY=", "https_proxy=", "NO_PROXY=", "no_proxy=")
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, errb.String())
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n"), errb.String()
	}
	for _, tc := range tests {
		t.Run(tc.scenario, func(t *testing.T) {
			plain, errPlain := run(t, "-adopt", "none", "-scenario", tc.scenario)
			withFerry, errFerry := run(t, "-adopt", "install", "-scenario", tc.scenario)
			if errPlain != "" || errFerry != "" {
				t.Errorf("stderr without ferry %q, with ferry %q: want nothing logged", errPlain, errFerry)
			}
			var behaviour, stats []string
			for _, l := range withFerry {
				if strings.HasPrefix(l, "ferry ") {
					stats = append(stats, l)
				} else {
					behaviour = append(behaviour, l)
				}
			}
			want := slices.Clone(plain)
			for _, d := range tc.differs {
				i := slices.Index(want, d[0])
				if i < 0 {
					t.Fatalf("the run without ferry lacks %q:\n%s", d[0], strings.Join(plain, "\n"))
				}
				want[i] = d[1]
			}
			if !slices.Equal(behaviour, want) {
				t.Errorf("with ferry:\n%s\nwant (without ferry, known differences applied):\n%s",
					strings.Join(behaviour, "\n"), strings.Join(want, "\n"))
			}
			if !slices.Equal(stats, tc.ferry) {
				t.Errorf("ferry's Stats lines:\n%s\nwant:\n%s", strings.Join(stats, "\n"), strings.Join(tc.ferry, "\n"))
			}
		})
	}
}

// newAdoptedTransport registers an adoption on a fresh http.Transport (not
// http.DefaultTransport: this process's globals stay untouched) with
// settings like net/http's DefaultTransport, and installs ferry on it.
func newAdoptedTransport(t *testing.T) (*http.Transport, *Transport, func()) {
	t.Helper()
	std := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	a, err := registerAdoption(std)
	if err != nil {
		t.Fatal(err)
	}
	setUpProtocols(std)
	ft, undo := a.install()
	t.Cleanup(func() {
		undo()
		ft.CloseIdleConnections()
		std.CloseIdleConnections()
	})
	return std, ft, undo
}

// settingChanges changes each exported field of http.Transport in a way a
// program would, keeping requests to a plain-http loopback server working.
var settingChanges = map[string]func(*http.Transport){
	"Proxy": func(s *http.Transport) { s.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil } },
	"OnProxyConnectResponse": func(s *http.Transport) {
		s.OnProxyConnectResponse = func(context.Context, *url.URL, *http.Request, *http.Response) error { return nil }
	},
	// The same method, on another net.Dialer: a different function value.
	"DialContext": func(s *http.Transport) { s.DialContext = (&net.Dialer{Timeout: 5 * time.Second}).DialContext },
	"Dial":        func(s *http.Transport) { s.Dial = net.Dial },
	"DialTLSContext": func(s *http.Transport) {
		s.DialTLSContext = func(ctx context.Context, n, a string) (net.Conn, error) { return nil, errors.New("unused") }
	},
	"DialTLS": func(s *http.Transport) {
		s.DialTLS = func(n, a string) (net.Conn, error) { return nil, errors.New("unused") }
	},
	"TLSClientConfig":       func(s *http.Transport) { s.TLSClientConfig = &tls.Config{} },
	"TLSHandshakeTimeout":   func(s *http.Transport) { s.TLSHandshakeTimeout = time.Second },
	"DisableKeepAlives":     func(s *http.Transport) { s.DisableKeepAlives = true },
	"DisableCompression":    func(s *http.Transport) { s.DisableCompression = true },
	"MaxIdleConns":          func(s *http.Transport) { s.MaxIdleConns = 5 },
	"MaxIdleConnsPerHost":   func(s *http.Transport) { s.MaxIdleConnsPerHost = 5 },
	"MaxConnsPerHost":       func(s *http.Transport) { s.MaxConnsPerHost = 5 },
	"IdleConnTimeout":       func(s *http.Transport) { s.IdleConnTimeout = time.Second },
	"ResponseHeaderTimeout": func(s *http.Transport) { s.ResponseHeaderTimeout = time.Minute },
	"ExpectContinueTimeout": func(s *http.Transport) { s.ExpectContinueTimeout = 2 * time.Second },
	"TLSNextProto":          func(s *http.Transport) { s.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} },
	"ProxyConnectHeader":    func(s *http.Transport) { s.ProxyConnectHeader = http.Header{"X-Via": {"a"}} },
	"GetProxyConnectHeader": func(s *http.Transport) {
		s.GetProxyConnectHeader = func(context.Context, *url.URL, string) (http.Header, error) { return nil, nil }
	},
	"MaxResponseHeaderBytes": func(s *http.Transport) { s.MaxResponseHeaderBytes = 1 << 16 },
	"WriteBufferSize":        func(s *http.Transport) { s.WriteBufferSize = 8 << 10 },
	"ReadBufferSize":         func(s *http.Transport) { s.ReadBufferSize = 8 << 10 },
	"ForceAttemptHTTP2":      func(s *http.Transport) { s.ForceAttemptHTTP2 = false },
	"HTTP2":                  func(s *http.Transport) { s.HTTP2 = &http.HTTP2Config{} },
	"Protocols": func(s *http.Transport) {
		var p http.Protocols
		p.SetHTTP1(true)
		s.Protocols = &p
	},
}

// TestInstallRegisteredDeclinesChangedSetting: after any exported field of
// the adopted transport changes, its requests go to net/http (ferry's
// Stats stay still, the server still answers), and a map grown in place
// counts as a change. The table must name every exported field of
// http.Transport on the toolchain running the test, so a field a new Go
// adds fails here until stdSnapshot covers it.
func TestInstallRegisteredDeclinesChangedSetting(t *testing.T) {
	st := reflect.TypeFor[http.Transport]()
	var fields []string
	for i := 0; i < st.NumField(); i++ {
		if f := st.Field(i); f.IsExported() {
			fields = append(fields, f.Name)
			if settingChanges[f.Name] == nil {
				t.Errorf("http.Transport.%s has no entry in settingChanges (and stdSnapshot may not cover it)", f.Name)
			}
		}
	}
	if sn := reflect.TypeFor[stdSnapshot]().NumField(); sn < len(fields) {
		t.Errorf("stdSnapshot has %d fields for %d settings", sn, len(fields))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	get := func(t *testing.T, std *http.Transport) {
		t.Helper()
		resp, err := (&http.Client{Transport: std}).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "ok" {
			t.Fatalf("body %q, %v", b, err)
		}
	}
	changes := map[string]func(*http.Transport){
		"ProxyConnectHeader-in-place": func(s *http.Transport) { s.ProxyConnectHeader.Set("X-Added", "b") },
	}
	for _, name := range fields {
		if c := settingChanges[name]; c != nil {
			changes[name] = c
		}
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			std, ft, _ := newAdoptedTransport(t)
			if name == "ProxyConnectHeader-in-place" {
				// A map the program set before Install, then grows.
				std.ProxyConnectHeader = http.Header{"X-Via": {"a"}}
				std, ft = readopt(t, std)
			}
			get(t, std)
			if n := ft.Stats().Requests.H1; n != 1 {
				t.Fatalf("before the change ferry served %d requests, want 1", n)
			}
			change(std)
			get(t, std)
			get(t, std)
			if n := ft.Stats().Requests.H1; n != 1 {
				t.Errorf("after changing %s ferry served %d requests, want still 1 (declined to net/http)", name, n)
			}
		})
	}
}

// readopt registers an adoption on std (already configured by the test)
// and installs ferry on it.
func readopt(t *testing.T, std *http.Transport) (*http.Transport, *Transport) {
	t.Helper()
	fresh := &http.Transport{ProxyConnectHeader: std.ProxyConnectHeader, ForceAttemptHTTP2: true}
	a, err := registerAdoption(fresh)
	if err != nil {
		t.Fatal(err)
	}
	setUpProtocols(fresh)
	ft, undo := a.install()
	t.Cleanup(func() {
		undo()
		ft.CloseIdleConnections()
		fresh.CloseIdleConnections()
	})
	return fresh, ft
}

// TestInstallRegisteredRoutesAndUndoes: requests through the adopted
// transport go to ferry, its CloseIdleConnections reaches ferry's pool,
// and after undo they go to net/http; a registration on a transport that
// net/http's HTTP/2 has claimed (it was used) is refused, registering
// nothing.
func TestInstallRegisteredRoutesAndUndoes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	defer srv.Close()
	std, ft, undo := newAdoptedTransport(t)
	for range 2 {
		resp, err := std.RoundTrip(mustRequest(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if s := ft.Stats(); s.Requests.H1 != 2 || s.Conns.IdleH1 != 1 {
		t.Fatalf("ferry served %d requests with %d idle connections, want 2 and 1", s.Requests.H1, s.Conns.IdleH1)
	}
	std.CloseIdleConnections()
	if n := ft.Stats().Conns.IdleH1; n != 0 {
		t.Fatalf("%d ferry connections idle after the adopted transport's CloseIdleConnections, want 0", n)
	}
	if std.TLSClientConfig == nil || ft.TLSClientConfig != std.TLSClientConfig {
		t.Errorf("TLSClientConfig: adopted %p, ferry %p: want one shared non-nil config", std.TLSClientConfig, ft.TLSClientConfig)
	}
	undo()
	resp, err := std.RoundTrip(mustRequest(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := ft.Stats().Requests.H1; n != 2 {
		t.Errorf("after undo ferry served %d requests, want still 2", n)
	}

	used := &http.Transport{ForceAttemptHTTP2: true}
	used.CloseIdleConnections() // net/http's setup runs: its HTTP/2 takes "https"
	defer used.CloseIdleConnections()
	if _, err := registerAdoption(used); err == nil {
		t.Fatal("registered on a transport whose https scheme net/http's HTTP/2 holds")
	}
}
