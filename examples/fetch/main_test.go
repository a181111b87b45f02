package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo answers with the method, the X-Test header and the body it got.
type echo struct {
	mu   sync.Mutex // guards seen
	seen []string
}

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	line := r.Method + " " + r.Header.Get("X-Test") + " " + string(b)
	e.mu.Lock()
	e.seen = append(e.seen, line)
	e.mu.Unlock()
	io.WriteString(w, line)
}

func TestFetch(t *testing.T) {
	e := &echo{}
	plain := httptest.NewServer(e)
	defer plain.Close()
	tests := []struct {
		name    string
		cfg     config
		wantErr string
		want    []string // substrings of the output
	}{
		{
			name: "post-with-headers",
			cfg:  config{url: plain.URL + "/x", n: 1, data: "hello", headers: []string{"X-Test: yes"}},
			want: []string{"POST " + plain.URL + "/x", "status      200 OK", "protocol    HTTP/1.1",
				"body        14 bytes", "connection  new", "alt-svc: none advertised", "transport: 1 TCP dials"},
		},
		{
			name: "repeat-plain-lines",
			cfg:  config{url: plain.URL, n: 3, method: "PUT"},
			want: []string{"[1/3] HTTP/1.1 200 OK", "[3/3] HTTP/1.1 200 OK", "requests    3 (0 failed)",
				"HTTP/1.1    3", "median", "p90", "transport: 1 TCP dials, 0 QUIC connections; responses h1/h2/h3 3/0/0"},
		},
		{
			name: "repeat-tty",
			cfg:  config{url: plain.URL, n: 2, tty: true},
			want: []string{"\r[1/2] HTTP/1.1", "\033[K", "\r[2/2] HTTP/1.1"},
		},
		{name: "bad-scheme", cfg: config{url: "ftp://127.0.0.1/", n: 1}, wantErr: "unsupported URL scheme"},
		{name: "bad-header", cfg: config{url: plain.URL, n: 1, headers: []string{"nocolon"}}, wantErr: "bad -H"},
		{name: "bad-n", cfg: config{url: plain.URL, n: 0}, wantErr: "-n must be"},
		{name: "missing-ca", cfg: config{url: plain.URL, n: 1, caFile: "/nonexistent/ca.pem"}, wantErr: "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			tc.cfg.out = &out
			tc.cfg.timeout = 10 * time.Second
			err := run(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 || e.seen[0] != "POST yes hello" {
		t.Fatalf("server saw %q first, want the POST with its header and body", e.seen)
	}
}

// TestFetchRefused: a request that fails is reported, and run fails.
func TestFetchRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	var out strings.Builder
	err := run(config{url: u, n: 2, out: &out, timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "2 of 2 requests failed") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(out.String(), "error:") {
		t.Fatalf("failures not shown:\n%s", out.String())
	}
}

// TestFetchHTTP3: against ferry's server wrapper, the first response
// (HTTP/2) teaches the Transport the h3 alternative; with a pause between
// requests longer than a loopback QUIC handshake, the last ones go over
// HTTP/3, and the learned alternative is printed.
func TestFetchHTTP3(t *testing.T) {
	cert, err := selfsigned.New()
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := server.Wrap(&http.Server{Addr: "127.0.0.1:0", Handler: &echo{}, TLSConfig: cert.ServerConfig()})
	if err := srv.ListenTLS("", ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(); close(done) }()
	defer func() { srv.Close(); <-done }()
	u := "https://" + srv.Addr().String() + "/"

	var out strings.Builder
	err = run(config{url: u, n: 4, caFile: ca, interval: 300 * time.Millisecond, out: &out, timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	o := out.String()
	for _, w := range []string{"[1/4] HTTP/2.0 200 OK", "[4/4] HTTP/3.0 200 OK",
		"alt-svc learned: h3 at 127.0.0.1:" + srv.Addr().String()[len("127.0.0.1:"):], "usable", "1 QUIC connections; responses h1/h2/h3 0/1/3"} {
		if !strings.Contains(o, w) {
			t.Errorf("output lacks %q:\n%s", w, o)
		}
	}
	// The first request dialled: DNS is skipped for an IP literal, the
	// connect and TLS phases are timed.
	if !strings.Contains(o, "connection  new") || strings.Contains(o, "tls         -") {
		t.Errorf("first request's phases missing:\n%s", o)
	}
}
