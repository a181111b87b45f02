package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"go.uber.org/goleak"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCert is shared by the tests; generating a key per test is wasted work.
var testCert = func() *selfsigned.Cert {
	c, err := selfsigned.New()
	if err != nil {
		panic(err)
	}
	return c
}()

// echoProto answers with the protocol the request arrived on.
var echoProto = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, r.Proto)
})

// started is a Server serving TLS on a kernel-chosen loopback port.
type started struct {
	srv       *Server
	port      string
	serveDone chan struct{} // closed when Serve returned
	serveErr  error         // Serve's result, set before serveDone closes
}

// waitServe waits for Serve to return and gives its error.
func (st *started) waitServe() error {
	<-st.serveDone
	return st.serveErr
}

// startTLS wraps hs (Addr defaulting to 127.0.0.1:0), lets configure adjust
// the wrapper, binds with the test certificate files and serves. The
// cleanup closes the server and checks Serve returned ErrServerClosed.
func startTLS(t testing.TB, hs *http.Server, configure func(*Server)) *started {
	t.Helper()
	if hs.Addr == "" {
		hs.Addr = "127.0.0.1:0"
	}
	certFile, keyFile, err := testCert.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := Wrap(hs)
	if configure != nil {
		configure(srv)
	}
	if err := srv.ListenTLS(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	st := &started{srv: srv, serveDone: make(chan struct{})}
	_, st.port, _ = net.SplitHostPort(srv.Addr().String())
	go func() {
		st.serveErr = srv.Serve()
		close(st.serveDone)
	}()
	t.Cleanup(func() {
		srv.Close()
		if err := st.waitServe(); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return st
}

func (st *started) url(path string) string {
	return "https://127.0.0.1:" + st.port + path
}

// protocol names the client kinds the tests run against the server.
type protocol string

const (
	h1 protocol = "HTTP/1.1"
	h2 protocol = "HTTP/2.0"
	h3 protocol = "HTTP/3.0"
)

var allProtocols = []protocol{h1, h2, h3}

// newClient returns a client speaking exactly p to servers trusting the test
// certificate; the cleanup closes its connections.
func newClient(t testing.TB, p protocol) *http.Client {
	t.Helper()
	tlsConf := &tls.Config{RootCAs: testCert.Pool}
	var rt http.RoundTripper
	switch p {
	case h1, h2:
		tr := &http.Transport{TLSClientConfig: tlsConf, Protocols: new(http.Protocols)}
		if p == h1 {
			tr.Protocols.SetHTTP1(true)
		} else {
			tr.Protocols.SetHTTP2(true)
		}
		t.Cleanup(tr.CloseIdleConnections)
		rt = tr
	case h3:
		tr := &http3.Transport{TLSClientConfig: tlsConf}
		t.Cleanup(func() { tr.Close() })
		rt = tr
	}
	return &http.Client{Transport: rt, Timeout: 30 * time.Second}
}

// get fetches url and returns the response with its body read.
func get(t testing.TB, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp, string(body)
}

func TestProtocolsSameHandler(t *testing.T) {
	st := startTLS(t, &http.Server{Handler: echoProto}, nil)
	for _, p := range allProtocols {
		t.Run(string(p), func(t *testing.T) {
			resp, body := get(t, newClient(t, p), st.url("/"))
			if resp.StatusCode != 200 || body != string(p) || resp.Proto != string(p) {
				t.Fatalf("status %d, proto %s, body %q; want 200 over %s", resp.StatusCode, resp.Proto, body, p)
			}
		})
	}
}

func TestAltSvc(t *testing.T) {
	tests := []struct {
		name       string
		disableH3  bool
		maxAge     time.Duration
		wantHeader string // with PORT for the bound port; "" = absent
	}{
		{"default max-age", false, 0, `h3=":PORT"; ma=86400`},
		{"custom max-age", false, 90 * time.Second, `h3=":PORT"; ma=90`},
		{"http3 disabled", true, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := startTLS(t, &http.Server{Handler: echoProto}, func(s *Server) {
				s.DisableHTTP3 = tt.disableH3
				s.AltSvcMaxAge = tt.maxAge
			})
			want := strings.ReplaceAll(tt.wantHeader, "PORT", st.port)
			for _, p := range []protocol{h1, h2} {
				resp, _ := get(t, newClient(t, p), st.url("/"))
				if got := resp.Header.Get("Alt-Svc"); got != want {
					t.Errorf("%s: Alt-Svc %q, want %q", p, got, want)
				}
				if vals := resp.Header.Values("Alt-Svc"); len(vals) > 1 {
					t.Errorf("%s: %d Alt-Svc fields, want at most 1", p, len(vals))
				}
			}
			if tt.disableH3 {
				if a := st.srv.PacketAddr(); a != nil {
					t.Errorf("PacketAddr %v with HTTP/3 disabled, want nil", a)
				}
				return
			}
			resp, _ := get(t, newClient(t, h3), st.url("/"))
			if got := resp.Header.Get("Alt-Svc"); got != "" {
				t.Errorf("HTTP/3 response carries Alt-Svc %q", got)
			}
		})
	}
}

func TestAltSvcHandlerOverrides(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/delete" {
			w.Header().Del("Alt-Svc")
		} else {
			w.Header().Set("Alt-Svc", "clear")
		}
	})
	st := startTLS(t, &http.Server{Handler: h}, nil)
	c := newClient(t, h1)
	if resp, _ := get(t, c, st.url("/delete")); resp.Header.Get("Alt-Svc") != "" {
		t.Errorf("deleted Alt-Svc still sent: %q", resp.Header.Get("Alt-Svc"))
	}
	if resp, _ := get(t, c, st.url("/set")); resp.Header.Get("Alt-Svc") != "clear" {
		t.Errorf("Alt-Svc %q, want the handler's \"clear\"", resp.Header.Get("Alt-Svc"))
	}
}

func TestNegativeAltSvcMaxAge(t *testing.T) {
	srv := Wrap(&http.Server{Addr: "127.0.0.1:0"})
	srv.AltSvcMaxAge = -time.Second
	certFile, keyFile, err := testCert.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ListenTLS(certFile, keyFile); err == nil || !strings.Contains(err.Error(), "AltSvcMaxAge") {
		t.Fatalf("ListenTLS error %v, want one naming AltSvcMaxAge", err)
	}
}

func TestShutdownBeforeServe(t *testing.T) {
	srv := Wrap(&http.Server{Addr: "127.0.0.1:0", TLSConfig: testCert.ServerConfig()})
	if err := srv.ListenTLS("", ""); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve after Shutdown: %v, want ErrServerClosed", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("TCP listener still accepting after Shutdown")
	}
	if err := srv.ListenTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("ListenTLS after Shutdown: %v, want ErrServerClosed", err)
	}
}

func TestServeBeforeListen(t *testing.T) {
	if err := Wrap(&http.Server{}).Serve(); !errors.Is(err, ErrNotListening) {
		t.Fatalf("Serve: %v, want ErrNotListening", err)
	}
}

func TestListenTwice(t *testing.T) {
	st := startTLS(t, &http.Server{Handler: echoProto}, nil)
	// A served request proves the first Serve is running.
	if resp, _ := get(t, newClient(t, h1), st.url("/")); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := st.srv.ListenTLS("", ""); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second ListenTLS: %v, want ErrAlreadyStarted", err)
	}
	if err := st.srv.Serve(); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Serve: %v, want ErrAlreadyStarted", err)
	}
}

// netSplitPort is net.SplitHostPort, named for readability at call sites.
func netSplitPort(hostport string) (host, port string, err error) {
	return net.SplitHostPort(hostport)
}
