package proxydial

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// requireBinary skips the test when name is not installed, except under
// CI=true, where a missing binary is a failure (.ci/run installs it).
func requireBinary(t *testing.T, name, aptPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found but CI=true: install the %s package", name, aptPackage)
	}
	t.Skipf("%s not installed (apt-get install -y %s); skipping the real-proxy test", name, aptPackage)
	return ""
}

// freeLoopbackPort returns a port that was free a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// lockedBuffer collects a daemon's output.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startDaemon runs a proxy in the foreground in its own process group,
// waits until addr accepts connections, and stops the group at cleanup.
func startDaemon(t *testing.T, addr, bin string, args ...string) {
	t.Helper()
	out := &lockedBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s exited early (%v):\n%s", bin, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s:\n%s", bin, addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startTinyproxy runs tinyproxy on loopback, allowing CONNECT to
// connectPort only, with Basic auth when user is set.
func startTinyproxy(t *testing.T, connectPort int, user, pass string) string {
	bin := requireBinary(t, "tinyproxy", "tinyproxy")
	port := freeLoopbackPort(t)
	conf := fmt.Sprintf("Port %d\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nConnectPort %d\nMaxClients 20\nLogLevel Info\n", port, connectPort)
	if user != "" {
		conf += fmt.Sprintf("BasicAuth %s %s\n", user, pass)
	}
	path := filepath.Join(t.TempDir(), "tinyproxy.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startDaemon(t, addr, bin, "-d", "-c", path)
	return addr
}

// startDante runs danted as a SOCKS5 server on loopback without
// authentication. (Dante's username method checks system accounts, which
// a test should not create; SOCKS5 auth is covered by the in-process
// server in socks_test.go.)
func startDante(t *testing.T) string {
	bin := requireBinary(t, "danted", "dante-server")
	port := freeLoopbackPort(t)
	conf := fmt.Sprintf(`logoutput: stderr
internal: 127.0.0.1 port = %d
external: 127.0.0.1
clientmethod: none
socksmethod: none
user.privileged: root
user.unprivileged: nobody
client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
`, port)
	path := filepath.Join(t.TempDir(), "danted.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startDaemon(t, addr, bin, "-f", path)
	return addr
}

func TestTinyproxy(t *testing.T) {
	tlsOrigin := newOrigin(t, true)
	plainOrigin := newOrigin(t, false)
	_, portS, _ := net.SplitHostPort(tlsOrigin.addr())
	var connectPort int
	fmt.Sscan(portS, &connectPort)
	addr := startTinyproxy(t, connectPort, testUser, testPassword)

	t.Run("CONNECT with credentials to a TLS origin", func(t *testing.T) {
		conn, err := Tunnel(context.Background(), proxyURL("http", addr, true), tlsOrigin.addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, body, err := getOver(conn, tlsOrigin.addr(), tlsOrigin.clientTLS("127.0.0.1"))
		if err != nil || code != 200 || body != "hello from origin" {
			t.Fatalf("%d %q %v", code, body, err)
		}
	})
	t.Run("CONNECT without credentials is 407", func(t *testing.T) {
		_, err := Tunnel(context.Background(), proxyURL("http", addr, false), tlsOrigin.addr(), nil)
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 407 || se.Status == "" {
			t.Fatalf("want *StatusError 407, got %v", err)
		}
	})
	// tinyproxy answers bad credentials with 401, missing ones with 407.
	t.Run("wrong password is refused and never echoed", func(t *testing.T) {
		u := proxyURL("http", addr, true)
		u.User = url.UserPassword(testUser, testPassword+"-wrong")
		_, err := Tunnel(context.Background(), u, tlsOrigin.addr(), nil)
		assertNoSecret(t, err)
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 401 || se.Status != "Unauthorized" {
			t.Fatalf("want *StatusError 401 Unauthorized, got %v", err)
		}
	})
	t.Run("CONNECT to a port not allowed", func(t *testing.T) {
		_, err := Tunnel(context.Background(), proxyURL("http", addr, true), plainOrigin.addr(), nil)
		assertNoSecret(t, err)
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 403 {
			t.Fatalf("want *StatusError 403, got %v", err)
		}
	})
	t.Run("absolute-form http request", func(t *testing.T) {
		conn, err := DialProxy(context.Background(), proxyURL("http", addr, true), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, body, err := getViaForwardingProxy(conn, plainOrigin.addr(), proxyURL("http", addr, true))
		if err != nil || code != 200 || body != "hello from origin" {
			t.Fatalf("%d %q %v", code, body, err)
		}
	})
}

func TestDante(t *testing.T) {
	tlsOrigin := newOrigin(t, true)
	addr := startDante(t)
	_, port, _ := net.SplitHostPort(tlsOrigin.addr())
	cases := []struct {
		name   string
		scheme string
		target string
		cfg    *Config
		ok     bool
	}{
		{"socks5h, proxy resolves localhost", "socks5h", net.JoinHostPort("localhost", port), nil, true},
		{"socks5, IP target", "socks5", tlsOrigin.addr(), nil, true},
		{"socks5, resolved locally", "socks5", net.JoinHostPort("localhost", port), &Config{LookupSOCKS5: lookupLocalhost}, true},
		{"target refuses", "socks5h", closedAddr(t), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := Tunnel(context.Background(), proxyURL(tc.scheme, addr, false), tc.target, tc.cfg)
			if !tc.ok {
				if err == nil {
					conn.Close()
					t.Fatal("want an error")
				}
				if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "refused") {
					t.Fatalf("error should name the proxy and the SOCKS failure: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			host, _, _ := net.SplitHostPort(tc.target)
			code, body, err := getOver(conn, tc.target, tlsOrigin.clientTLS(host))
			if err != nil || code != 200 || body != "hello from origin" {
				t.Fatalf("%d %q %v", code, body, err)
			}
		})
	}
}
