package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"github.com/ferryhttp/ferry/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServeDirectory serves a directory, fetches a file from it over
// HTTP/1.1, HTTP/2 and HTTP/3 with the printed CA certificate, then stops
// the server the way a signal does and checks it shut down cleanly.
func TestServeDirectory(t *testing.T) {
	dir := t.TempDir()
	const content = "hello from ferry\n"
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out testpeer.SyncBuffer
	type started struct{ url, ca string }
	ready := make(chan started, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{dir: dir, addr: "127.0.0.1:0", out: &out,
			ready: func(url, ca string) { ready <- started{url, ca} }})
	}()
	var s started
	select {
	case s = <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{"URL      " + s.url, `Alt-Svc  h3=":`, "curl --cacert " + s.ca} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	pem, err := os.ReadFile(s.ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("the CA file holds no certificate")
	}
	get := func(rt http.RoundTripper) string {
		t.Helper()
		req, _ := http.NewRequest("GET", s.url+"hello.txt", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(b) != content {
			t.Fatalf("%s: status %d, body %q, %v", resp.Proto, resp.StatusCode, b, err)
		}
		return resp.Proto
	}
	h1 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer h1.CloseIdleConnections()
	if p := get(h1); p != "HTTP/1.1" {
		t.Errorf("net/http without HTTP/2: %s", p)
	}
	ft := transport.New()
	ft.TLSClientConfig = &tls.Config{RootCAs: roots}
	defer ft.CloseIdleConnections()
	if p := get(ft); p != "HTTP/2.0" {
		t.Errorf("first ferry request: %s, want HTTP/2.0 (before Alt-Svc is known)", p)
	}
	// The first response's Alt-Svc starts the QUIC handshake; HTTP/3
	// follows as soon as it is done.
	deadline := time.Now().Add(10 * time.Second)
	for get(ft) != "HTTP/3.0" {
		if time.Now().After(deadline) {
			t.Fatal("ferry never switched to HTTP/3")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ft.CloseIdleConnections()
	h1.CloseIdleConnections()

	cancel() // as SIGINT does
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no shutdown")
	}
	if !strings.Contains(out.String(), "shutting down") {
		t.Errorf("output lacks the shutdown line:\n%s", out.String())
	}
	if _, err := os.Stat(s.ca); !os.IsNotExist(err) {
		t.Errorf("CA file left behind: %v", err)
	}
}

// TestBadDir: a missing directory is an error, not a server of nothing.
func TestBadDir(t *testing.T) {
	err := run(context.Background(), config{dir: filepath.Join(t.TempDir(), "missing"), addr: "127.0.0.1:0", out: io.Discard})
	if err == nil {
		t.Fatal("serving a missing directory succeeded")
	}
}
