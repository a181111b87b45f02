package transport

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestH3InteropCaddy talks to an independent HTTP/3 implementation: Caddy
// (Debian's /usr/bin/caddy), serving https with a certificate from files on
// a loopback port and advertising HTTP/3 with its own Alt-Svc header. The
// first request goes over TCP and learns the alternative; later ones go
// over HTTP/3.0. Skipped when caddy is not installed, failed in CI
// (CI=true).
func TestH3InteropCaddy(t *testing.T) {
	bin := testpeer.Binary(t, "caddy", "caddy")
	u := startCaddy(t, bin)
	tr := newH3Transport(t, nil)

	resp, body := fetch(t, tr, "GET", u, nil)
	if !isTCPProto(resp.Proto) || !strings.Contains(resp.Header.Get("Alt-Svc"), "h3=") {
		t.Fatalf("first request: proto %s, Alt-Svc %q; want TCP advertising h3", resp.Proto, resp.Header.Get("Alt-Svc"))
	}
	if body != "caddy says "+resp.Proto {
		t.Fatalf("first body %q", body)
	}
	eventually(t, "HTTP/3 to caddy", func() bool { return h3Ready(t, tr, u) })
	for i := 0; i < 3; i++ {
		resp, body := fetch(t, tr, "GET", u, nil)
		if resp.Proto != "HTTP/3.0" || body != "caddy says HTTP/3.0" {
			t.Fatalf("request %d: proto %s body %q; want HTTP/3.0 both sides", i+2, resp.Proto, body)
		}
	}
	resp, body = fetch(t, tr, "POST", u+"/echo", strings.NewReader("ping"))
	if resp.Proto != "HTTP/3.0" || body != "caddy says HTTP/3.0" {
		t.Fatalf("POST: proto %s body %q", resp.Proto, body)
	}
}

// startCaddy runs caddy with a generated Caddyfile in a temporary directory
// (admin API off, no automatic HTTPS, no ACME) and returns its https URL.
func startCaddy(t *testing.T, bin string) string {
	return startCaddySite(t, bin, h3Cert(t), "h1 h2 h3", `respond "caddy says {http.request.proto}" 200`)
}

// startCaddySite is startCaddy serving cert, with protocols (Caddy's
// servers option) and site, the directives of the one site.
func startCaddySite(t *testing.T, bin string, cert *selfsigned.Cert, protocols, site string) string {
	dir := t.TempDir()
	certFile, keyFile, err := cert.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	port := freeTCPAndUDPPort(t)
	caddyfile := fmt.Sprintf(`{
	admin off
	auto_https off
	default_sni 127.0.0.1
	storage file_system %q
	servers {
		protocols %s
	}
}

https://127.0.0.1:%d {
	bind 127.0.0.1
	tls %q %q
	%s
}
`, filepath.Join(dir, "data"), protocols, port, certFile, keyFile, site)
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	testpeer.StartDaemonEnv(t, addr, []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir},
		bin, "run", "--config", cfg, "--adapter", "caddyfile")
	return "https://" + addr
}

// freeTCPAndUDPPort returns a loopback port free for both TCP and UDP at
// the time of the call.
func freeTCPAndUDPPort(t *testing.T) int {
	for i := 0; i < 20; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		ln.Close()
		if err == nil {
			pc.Close()
			return port
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}
