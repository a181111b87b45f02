package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Real proxy servers, started on loopback by the test with a generated
// configuration and stopped after it: tinyproxy (forwarding and CONNECT,
// Basic auth) and dante (SOCKS5). Each case runs through net/http and
// ferry and must give the same outcome. A missing binary skips, except
// under CI=true where it fails.

func realProxyBinary(t *testing.T, name, aptPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found but CI=true: install the %s package", name, aptPackage)
	}
	t.Skipf("%s not installed (apt-get install -y %s): skipping the real-proxy test", name, aptPackage)
	return ""
}

// daemonLog collects a daemon's output for failure reports.
type daemonLog struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *daemonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *daemonLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runRealProxy writes conf to a file in t.TempDir, starts bin with args
// (where "CONF" is replaced by the file's path) in its own process group,
// waits until addr accepts connections and stops it at cleanup.
func runRealProxy(t *testing.T, bin, conf, addr string, args ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), filepath.Base(bin)+".conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if a == "CONF" {
			args[i] = path
		}
	}
	log := &daemonLog{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
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
			t.Logf("%s output:\n%s", filepath.Base(bin), log.String())
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
			t.Fatalf("%s exited early (%v):\n%s", bin, err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s:\n%s", bin, addr, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startTinyproxy runs tinyproxy with Basic auth, allowing CONNECT to
// connectPort only.
func startTinyproxy(t *testing.T, connectPort int) string {
	bin := realProxyBinary(t, "tinyproxy", "tinyproxy")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, port, _ := net.SplitHostPort(addr)
	conf := fmt.Sprintf("Port %s\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nConnectPort %d\nMaxClients 20\nLogLevel Info\nBasicAuth %s %s\n",
		port, connectPort, proxyUser, proxySecret)
	runRealProxy(t, bin, conf, addr, "-d", "-c", "CONF")
	return addr
}

// startDante runs danted as a SOCKS5 server without authentication
// (dante's username method checks system accounts, which a test must not
// create; SOCKS5 user/password is covered by the in-process server).
func startDante(t *testing.T) string {
	bin := realProxyBinary(t, "danted", "dante-server")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, port, _ := net.SplitHostPort(addr)
	conf := fmt.Sprintf(`logoutput: stderr
internal: 127.0.0.1 port = %s
external: 127.0.0.1
clientmethod: none
socksmethod: none
user.privileged: root
user.unprivileged: nobody
client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
`, port)
	runRealProxy(t, bin, conf, addr, "-f", "CONF")
	return addr
}

// realOutcome is what one request through a real proxy gave.
type realOutcome struct {
	Result     string
	OriginSaw  []string // method, request target, Host
	OriginAuth []string
}

func realRoundTrip(t *testing.T, impl string, e *proxyEnv, proxy *url.URL, target string) realOutcome {
	var rt http.RoundTripper = &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: tlsTestConfig(e.cert), ForceAttemptHTTP2: true}
	if impl == "ferry" {
		rt = &Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: tlsTestConfig(e.cert), ForceAttemptHTTP2: true}
	}
	defer closeIdle(rt)
	var out realOutcome
	for _, o := range []*testServer{e.origin, e.tlsOrigin, e.h2Origin} {
		if o != nil {
			o.mu.Lock()
			o.seen = nil
			o.mu.Unlock()
		}
	}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", target, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		out.Result = "error " + errKind(err)
		assertNoSecret(t, []error{err})
		t.Logf("%s: %v", impl, err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out.Result = fmt.Sprintf("%s %d %q", resp.Proto, resp.StatusCode, e.relabel(string(body)))
	}
	for _, o := range []*testServer{e.origin, e.tlsOrigin, e.h2Origin} {
		if o == nil {
			continue
		}
		o.mu.Lock()
		for _, r := range o.seen {
			out.OriginSaw = append(out.OriginSaw, e.relabel(r.Method+" "+r.URI))
			out.OriginAuth = append(out.OriginAuth, r.Header.Values("Proxy-Authorization")...)
		}
		o.mu.Unlock()
	}
	return out
}

func TestRealProxies(t *testing.T) {
	e := &proxyEnv{t: t, cert: proxyTestCert(t)}
	plainTarget := e.target("http", "127.0.0.1", "/plain?x=1")
	tlsTarget := e.target("https", "127.0.0.1", "/tls")
	h2Target := e.h2Target("127.0.0.1", "/h2")
	_, tlsPort, _ := net.SplitHostPort(e.tlsOrigin.hs.Listener.Addr().String())
	_, h2Port, _ := net.SplitHostPort(e.h2Origin.hs.Listener.Addr().String())

	type row struct {
		name   string
		proxy  *url.URL
		target string
		want   string // prefix of ferry's Result
	}
	run := func(t *testing.T, rows []row) {
		for _, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				std := realRoundTrip(t, "nethttp", e, r.proxy, r.target)
				fer := realRoundTrip(t, "ferry", e, r.proxy, r.target)
				if !reflect.DeepEqual(std, fer) {
					t.Errorf("outcomes differ\nnet/http: %+v\nferry:    %+v", std, fer)
				}
				if !strings.HasPrefix(fer.Result, r.want) {
					t.Errorf("ferry got %q, want %q...", fer.Result, r.want)
				}
				if len(fer.OriginAuth) != 0 {
					t.Errorf("Proxy-Authorization reached the origin: %q", fer.OriginAuth)
				}
			})
		}
	}
	withUser := func(addr, user, pass string) *url.URL {
		u := &url.URL{Scheme: "http", Host: addr}
		if user != "" {
			u.User = url.UserPassword(user, pass)
		}
		return u
	}
	t.Run("tinyproxy", func(t *testing.T) {
		var p, p2 int
		fmt.Sscan(tlsPort, &p)
		fmt.Sscan(h2Port, &p2)
		tiny, tinyH2 := startTinyproxy(t, p), startTinyproxy(t, p2)
		run(t, []row{
			{"http target forwarded with credentials", withUser(tiny, proxyUser, proxySecret), plainTarget, "HTTP/1.1 200"},
			{"https target through CONNECT", withUser(tiny, proxyUser, proxySecret), tlsTarget, "HTTP/1.1 200"},
			{"HTTP/2 inside CONNECT", withUser(tinyH2, proxyUser, proxySecret), h2Target, "HTTP/2.0 200"},
			{"forwarding without credentials is 407", withUser(tiny, "", ""), plainTarget, "HTTP/1.0 407"},
			{"CONNECT without credentials fails", withUser(tiny, "", ""), tlsTarget, "error error"},
			{"wrong password", withUser(tiny, proxyUser, "x"+proxySecret), tlsTarget, "error error"},
		})
	})
	t.Run("dante", func(t *testing.T) {
		dante := startDante(t)
		run(t, []row{
			{"socks5: http target", &url.URL{Scheme: "socks5", Host: dante}, plainTarget, "HTTP/1.1 200"},
			{"socks5h: https target by name", &url.URL{Scheme: "socks5h", Host: dante}, strings.Replace(tlsTarget, "127.0.0.1", "localhost", 1), "HTTP/1.1 200"},
			{"socks5: HTTP/2 target", &url.URL{Scheme: "socks5", Host: dante}, h2Target, "HTTP/2.0 200"},
		})
	})
}
