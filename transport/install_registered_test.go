package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
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
	"sync"
	"testing"
	"time"
	"unsafe"
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
			// After the program assigns TLSClientConfig, then Proxy,
			// ferry serves its requests with Transports built from the
			// new settings: the https request over HTTP/1.1 as net/http
			// (a config set after the first use offers its own ALPN
			// list, here none), the http one through the proxy.
			scenario: "mutate",
			ferry: []string{
				"ferry before-change h1=1 h2=0",
				"ferry after-tls-change h1=2 h2=0",
				"ferry after-proxy-change h1=3 h2=0",
			},
		},
		{
			// A clone of the config in use keeps the ALPN list net/http
			// put there at the first use: HTTP/2, served by ferry.
			scenario: "tls-clone-after-first-use",
			ferry:    []string{"ferry before-change h1=1 h2=0", "ferry after-tls-clone h1=1 h2=1"},
		},
		{
			// A TLS config set before the first request: ferry builds a
			// Transport from it and speaks HTTP/2, as net/http would.
			scenario: "tls-before-first-request",
			ferry:    []string{"ferry after-https h1=0 h2=1"},
		},
		{
			// After undo net/http sends the requests, with its HTTP/2
			// (through a clone of the transport: the transport itself
			// took ferry's registration for its HTTP/2).
			scenario: "undo-then-https",
			ferry:    []string{"ferry before-undo h1=0 h2=1", "ferry after-undo h1=0 h2=1"},
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

// TestInstallRegisteredAppliesChangedSetting: after any exported field of
// the adopted transport changes, its next request is served by a ferry
// Transport built once for the change with that field as the program set
// it, the replaced Transport's idle connection is closed, and Stats of the
// first Transport count every request; a map grown in place counts as a
// change. The table must name every exported field of http.Transport on
// the toolchain running the test, so a field a new Go adds fails here
// until stdSnapshot covers it.
func TestInstallRegisteredAppliesChangedSetting(t *testing.T) {
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
			field, _, _ := strings.Cut(name, "-")
			if name == "ProxyConnectHeader-in-place" {
				// A map the program set before Install, then grows.
				std.ProxyConnectHeader = http.Header{"X-Via": {"a"}}
				std, ft = readopt(t, std)
			}
			get(t, std)
			if s := ft.Stats(); s.Requests.H1 != 1 || s.Conns.IdleH1 != 1 {
				t.Fatalf("before the change ferry served %d requests, %d connections idle; want 1 and 1", s.Requests.H1, s.Conns.IdleH1)
			}
			change(std)
			get(t, std)
			serving := servingTransport(ft)
			get(t, std)
			if serving == ft {
				t.Fatalf("after changing %s the request was served by the Transport built before", name)
			}
			if again := servingTransport(ft); again != serving {
				t.Errorf("after changing %s once, a Transport was built for each of two requests", name)
			}
			if n := ft.ownStats().Conns.IdleH1; n != 0 {
				t.Errorf("the replaced Transport keeps %d idle connections, want 0", n)
			}
			// Twice: the first call folds the replaced Transport, which has
			// no connection left, into the lineage's sums.
			for range 2 {
				if n := ft.Stats().Requests.H1; n != 3 {
					t.Errorf("Stats of the installed Transport count %d requests, want 3", n)
				}
			}
			if members, _ := ft.line.snapshot(); len(members) != 1 {
				t.Errorf("the lineage keeps %d Transports after Stats, want only the one in use", len(members))
			}
			if !sameSetting(reflect.ValueOf(serving).Elem().FieldByName(field), reflect.ValueOf(std).Elem().FieldByName(field)) {
				t.Errorf("the Transport serving after the change has %s %v, the adopted transport %v", field,
					reflect.ValueOf(serving).Elem().FieldByName(field), reflect.ValueOf(std).Elem().FieldByName(field))
			}
		})
	}
}

// servingTransport is the Transport of ft's lineage in use now.
func servingTransport(ft *Transport) *Transport {
	members, _ := ft.line.snapshot()
	return members[0]
}

// sameSetting reports whether a setting of a ferry Transport is the
// adopted transport's: the same function, pointer (TLSClientConfig is
// shared), or an equal copy (maps, HTTP2, Protocols: From copies them).
func sameSetting(f, s reflect.Value) bool {
	switch f.Kind() {
	case reflect.Func:
		// The function value's identity (its closure or method value),
		// not only its code: both fields are addressable.
		return *(*unsafe.Pointer)(f.Addr().UnsafePointer()) == *(*unsafe.Pointer)(s.Addr().UnsafePointer())
	case reflect.Map:
		if f.Len() != s.Len() || f.IsNil() != s.IsNil() {
			return false
		}
		for _, k := range s.MapKeys() {
			fv, sv := f.MapIndex(k), s.MapIndex(k)
			if !fv.IsValid() || (sv.Kind() == reflect.Func && fv.Pointer() != sv.Pointer()) ||
				(sv.Kind() != reflect.Func && !reflect.DeepEqual(fv.Interface(), sv.Interface())) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		if f.Type() == reflect.TypeFor[*tls.Config]() {
			return f.Pointer() == s.Pointer()
		}
	}
	return reflect.DeepEqual(f.Interface(), s.Interface())
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

// TestInstallRegisteredChangeSeenByConcurrentRequests: requests that all
// find the settings changed at once are served by one Transport built for
// the change (any other built meanwhile is dropped unused), and Stats
// count every request.
func TestInstallRegisteredChangeSeenByConcurrentRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	std, ft, _ := newAdoptedTransport(t)
	std.MaxIdleConnsPerHost = 16
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			resp, err := std.RoundTrip(mustRequest(srv.URL))
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	members, _ := ft.line.snapshot()
	if len(members) != 2 || members[1] != ft {
		t.Errorf("the lineage holds %d Transports, want the one built for the change and the first", len(members))
	}
	if got := members[0].ownStats().Requests.H1; got != n {
		t.Errorf("the Transport built for the change served %d requests, want %d", got, n)
	}
	if got := ft.Stats().Requests.H1; got != n {
		t.Errorf("Stats of the installed Transport count %d requests, want %d", got, n)
	}
}

// TestInstallRegisteredTLSSetBeforeConcurrentFirstRequests: a TLS config
// assigned before the first requests, which come concurrently: every one
// is served by ferry over HTTP/2, and the config's NextProtos end as
// net/http's first use leaves them (a plain net/http transport treated
// the same way is the control).
func TestInstallRegisteredTLSSetBeforeConcurrentFirstRequests(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	srv.EnableHTTP2 = true
	// Surplus connections of the concurrent dials close mid-handshake.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	std, ft, _ := newAdoptedTransport(t)
	control := &http.Transport{ForceAttemptHTTP2: true}
	defer control.CloseIdleConnections()
	const n = 8
	for _, rt := range []*http.Transport{std, control} {
		rt.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
		var wg sync.WaitGroup
		protos := make(chan string, n)
		for range n {
			wg.Go(func() {
				resp, err := rt.RoundTrip(mustRequest(srv.URL))
				if err != nil {
					protos <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				protos <- resp.Proto
			})
		}
		wg.Wait()
		close(protos)
		for p := range protos {
			if p != "HTTP/2.0" {
				t.Errorf("a first request got %q, want HTTP/2.0", p)
			}
		}
	}
	if got, want := std.TLSClientConfig.NextProtos, control.TLSClientConfig.NextProtos; !slices.Equal(got, want) {
		t.Errorf("NextProtos after the first use: %q, net/http's %q", got, want)
	}
	if got := ft.Stats().Requests.H2; got != n {
		t.Errorf("ferry served %d requests over HTTP/2, want %d", got, n)
	}
}
