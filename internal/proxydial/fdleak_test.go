package proxydial

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count fds: %v", err)
	}
	return len(ents)
}

// TestNoFDLeakOnErrors runs every failure path many times and checks the
// client side closes what it opened.
func TestNoFDLeakOnErrors(t *testing.T) {
	p407 := newScriptedProxy(t, func(c net.Conn) { io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n") })
	bad := newScriptedProxy(t, func(c net.Conn) { io.WriteString(c, "nonsense\r\n\r\n") })
	silent := newScriptedProxy(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	socksFail := newSOCKSServer(t, "", "", 1)
	srvTLS, _ := proxyTLS(t)
	untrusted := newHTTPProxy(t, "", srvTLS)
	dead := testpeer.RefusingAddr(t)
	hookErr := &Config{OnProxyConnectResponse: func(context.Context, *url.URL, *http.Request, *http.Response) error { return io.ErrClosedPipe }}
	tries := []struct {
		scheme, addr string
		cfg          *Config
	}{
		{"http", p407.addr(), nil},
		{"http", bad.addr(), nil},
		{"http", silent.addr(), &Config{ConnectTimeout: time.Millisecond}},
		{"socks5h", socksFail.addr(), nil},
		{"https", untrusted.addr(), nil},
		{"http", dead, nil},
		{"http", p407.addr(), hookErr},
	}
	run := func() {
		for _, tr := range tries {
			conn, err := Tunnel(context.Background(), proxyURL(tr.scheme, tr.addr, true), "127.0.0.1:9", tr.cfg)
			if err == nil {
				conn.Close()
				t.Fatalf("%s %s: want an error", tr.scheme, tr.addr)
			}
		}
	}
	run() // warm up lazily opened descriptors (epoll, ...)
	before := openFDs(t)
	for range 20 {
		run()
	}
	after := openFDs(t)
	// Servers close their side asynchronously; only a growth proportional
	// to the number of attempts (140) would mean a leak.
	for i := 0; after > before+4 && i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		after = openFDs(t)
	}
	if after > before+4 {
		t.Fatalf("open fds grew from %d to %d over 140 failed tunnels", before, after)
	}
}
