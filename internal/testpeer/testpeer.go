// Package testpeer starts the real, independent programs that ferry's
// interop tests talk to (proxies, clients), on loopback only, with
// configurations generated into the test's temporary directory, and the
// in-process peers several packages' tests share: a raw HTTP/2 frame
// server (h2frames.go) for frames real servers rarely send on demand, a
// scripted raw TCP server (StartRaw, http1.go), TCP and UDP relays that
// can make a path go silent (relay.go), and request bodies with behaviour
// of their own (bodies.go).
//
// It is imported only by tests. A program that is not installed skips the
// test with the Debian package to install, except under CI=true, where
// .ci/run installs every peer and a missing one fails the test instead of
// letting it pass unseen.
package testpeer

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary returns the path of the program name, skipping the test when it
// is missing (failing it under CI=true).
func Binary(t testing.TB, name, debianPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found but CI=true: .ci/run must apt-get install %s", name, debianPackage)
	}
	t.Skipf("%s not installed (apt-get install -y %s): skipping the test with a real peer", name, debianPackage)
	return ""
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// RefusingAddr returns a loopback address ("127.0.0.1:port") where
// connections are refused for the whole test: a TCP socket is bound to the
// port and never listens (a connect gets a reset), and while it is bound no
// other socket, of this process or of another test binary running in
// parallel, can take the port. Closing a listener to free a port instead
// leaves a window in which another test's server may bind it, and the
// "refused" dial then reaches that server (CI saw this once).
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// SyncBuffer collects output written from several goroutines (a daemon's
// stdout and stderr, a logger) for a test to read. The zero value is ready
// to use.
type SyncBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

// Write appends p; it never fails.
func (o *SyncBuffer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns everything written so far.
func (o *SyncBuffer) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// StartDaemon runs bin with args in the foreground, in its own process
// group, waits (up to 15 s) until addr accepts TCP connections, and stops
// the whole group at cleanup (SIGTERM, then SIGKILL after 10 s). The
// daemon's output is logged when the test failed.
func StartDaemon(t testing.TB, addr, bin string, args ...string) {
	t.Helper()
	StartDaemonEnv(t, addr, nil, bin, args...)
}

// StartDaemonEnv is StartDaemon with env added to the daemon's environment
// (a "HOME" of the test's own, for example).
func StartDaemonEnv(t testing.TB, addr string, env []string, bin string, args ...string) {
	t.Helper()
	out := &SyncBuffer{}
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
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
	for deadline := time.Now().Add(15 * time.Second); ; {
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
			t.Fatalf("%s does not listen on %s:\n%s", bin, addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeConf writes a configuration file into the test's temporary
// directory and returns its path.
func writeConf(t testing.TB, name, conf string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Tinyproxy runs tinyproxy (HTTP forwarding and CONNECT) on loopback,
// allowing CONNECT to connectPort only, with Basic auth when user is set,
// and returns its host:port.
func Tinyproxy(t testing.TB, connectPort int, user, pass string) string {
	t.Helper()
	bin := Binary(t, "tinyproxy", "tinyproxy")
	port := FreePort(t)
	conf := fmt.Sprintf("Port %d\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nConnectPort %d\nMaxClients 20\nLogLevel Info\n", port, connectPort)
	if user != "" {
		conf += fmt.Sprintf("BasicAuth %s %s\n", user, pass)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	StartDaemon(t, addr, bin, "-d", "-c", writeConf(t, "tinyproxy.conf", conf))
	return addr
}

// Dante runs danted as a SOCKS5 server on loopback without authentication
// and returns its host:port. (Dante's username method checks system
// accounts, which a test must not create; SOCKS5 user/password is covered by
// the in-process servers of the tests.)
func Dante(t testing.TB) string {
	t.Helper()
	bin := Binary(t, "danted", "dante-server")
	port := FreePort(t)
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
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	StartDaemon(t, addr, bin, "-f", writeConf(t, "danted.conf", conf))
	return addr
}
