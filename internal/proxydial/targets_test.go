package proxydial

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// Credentials used throughout; every error string and every byte an origin
// receives is checked for them.
const (
	testUser     = "u5er-NAME"
	testPassword = "s3cr3t-PW"
)

// assertNoSecret fails if err's text carries the proxy credentials.
func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if strings.Contains(msg, testPassword) || strings.Contains(msg, testUser) {
		t.Fatalf("error string leaks proxy credentials: %q", msg)
	}
}

// origin is a loopback HTTP(S) server that records every raw request it
// receives, so tests can check that nothing proxy-related reached it.
type origin struct {
	srv  *httptest.Server
	cert *selfsigned.Cert

	mu  sync.Mutex // guards raw
	raw bytes.Buffer
}

// newOrigin starts a target answering "hello from origin" with 200; TLS
// when useTLS.
func newOrigin(t *testing.T, useTLS bool) *origin {
	t.Helper()
	o := &origin{}
	o.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			http.Error(w, "proxy credentials reached the origin", http.StatusTeapot)
			return
		}
		io.WriteString(w, "hello from origin")
	}))
	o.srv.Listener = &recordingListener{Listener: o.srv.Listener, o: o}
	if useTLS {
		cert, err := selfsigned.New()
		if err != nil {
			t.Fatal(err)
		}
		o.cert = cert
		o.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
		o.srv.StartTLS()
	} else {
		o.srv.Start()
	}
	t.Cleanup(func() {
		o.srv.Close()
		o.mu.Lock()
		defer o.mu.Unlock()
		if bytes.Contains(o.raw.Bytes(), []byte(testPassword)) || bytes.Contains(o.raw.Bytes(), []byte("Proxy-Authorization")) {
			t.Errorf("origin received proxy credentials:\n%s", o.raw.String())
		}
	})
	return o
}

func (o *origin) addr() string { return o.srv.Listener.Addr().String() }

// clientTLS is a client config trusting the origin, for host.
func (o *origin) clientTLS(host string) *tls.Config {
	return &tls.Config{RootCAs: o.cert.Pool, ServerName: host}
}

type recordingListener struct {
	net.Listener
	o *origin
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, o: l.o}, nil
}

// recordingConn copies everything read into the origin's record. For TLS
// origins the record holds ciphertext, so the plaintext check happens in
// the handler (Proxy-Authorization answered with 418).
type recordingConn struct {
	net.Conn
	o *origin
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.o.mu.Lock()
	c.o.raw.Write(p[:n])
	c.o.mu.Unlock()
	return n, err
}
