package selfsigned

import (
	"crypto/tls"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewHosts(t *testing.T) {
	tests := []struct {
		name  string
		hosts []string
		ok    []string // names that must verify
		bad   []string // names that must not
	}{
		{"default", nil, []string{"localhost", "127.0.0.1", "::1"}, []string{"example.com", "127.0.0.2"}},
		{"custom", []string{"ferry.test", "10.0.0.1"}, []string{"ferry.test", "10.0.0.1"}, []string{"localhost", "127.0.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.hosts...)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tt.ok {
				if err := c.Leaf.VerifyHostname(h); err != nil {
					t.Errorf("VerifyHostname(%q): %v", h, err)
				}
			}
			for _, h := range tt.bad {
				if err := c.Leaf.VerifyHostname(h); err == nil {
					t.Errorf("VerifyHostname(%q) succeeded, want error", h)
				}
			}
		})
	}
}

func TestNewInvalidHost(t *testing.T) {
	for _, h := range []string{"", "a b"} {
		if _, err := New(h); err == nil {
			t.Errorf("New(%q) succeeded, want error", h)
		}
	}
}

// TestHandshake checks the pair end to end over a real loopback TLS
// connection: the client trusts Pool and nothing else.
func TestHandshake(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", c.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		done <- conn.(*tls.Conn).Handshake()
	}()
	cfg := c.ClientConfig()
	cfg.ServerName = "localhost"
	conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A client with an unrelated pool must refuse it.
	other, err := New()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			conn.(*tls.Conn).Handshake()
			conn.Close()
		}
		done <- nil
	}()
	cfg = other.ClientConfig()
	cfg.ServerName = "localhost"
	if conn, err := tls.Dial("tcp", ln.Addr().String(), cfg); err == nil {
		conn.Close()
		t.Fatal("handshake with a foreign pool succeeded")
	}
	<-done
}

func TestWriteFiles(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile, err := c.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(pair.Certificate[0]) != string(c.TLS.Certificate[0]) {
		t.Fatal("written certificate differs from the generated one")
	}
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", st.Mode().Perm())
	}

	missing := filepath.Join(dir, "nope")
	if _, _, err := c.WriteFiles(missing); err == nil {
		t.Error("WriteFiles into a missing directory succeeded")
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v does not wrap fs.ErrNotExist", err)
	}
	if _, _, err := c.WriteFiles(""); err == nil {
		t.Error("WriteFiles(\"\") succeeded")
	}
}
