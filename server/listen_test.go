package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

func TestKernelChosenPort(t *testing.T) {
	tests := []struct {
		addr string
		host string // host to reach it on
	}{
		{"127.0.0.1:0", "127.0.0.1"},
		{":0", "127.0.0.1"},
		{"[::1]:0", "[::1]"},
		{"localhost:0", "localhost"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if strings.Contains(tt.host, "::1") && !hasIPv6Loopback() {
				t.Skip("no IPv6 loopback on this machine")
			}
			st := startTLS(t, &http.Server{Addr: tt.addr, Handler: echoProto}, nil)
			tcpPort := st.srv.Addr().(*net.TCPAddr).Port
			udpPort := st.srv.PacketAddr().(*net.UDPAddr).Port
			if tcpPort == 0 || tcpPort != udpPort {
				t.Fatalf("TCP port %d, UDP port %d; want the same non-zero port", tcpPort, udpPort)
			}
			for _, p := range allProtocols {
				url := fmt.Sprintf("https://%s:%d/", tt.host, tcpPort)
				if resp, body := get(t, newClient(t, p), url); resp.StatusCode != 200 || body != string(p) {
					t.Errorf("%s: status %d body %q", p, resp.StatusCode, body)
				}
			}
		})
	}
}

func hasIPv6Loopback() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// TestUDPPortTakenRetries makes the UDP port look taken for the first
// attempts: with a kernel-chosen port the bind moves on to a fresh TCP port;
// with an explicit port, or past the attempt limit, it fails naming UDP.
func TestUDPPortTakenRetries(t *testing.T) {
	tests := []struct {
		name     string
		failures int // how many UDP binds fail with EADDRINUSE
		wantErr  bool
	}{
		{"one taken", 1, false},
		{"all but last taken", bindAttempts - 1, false},
		{"always taken", bindAttempts, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var attempts int
			var triedPorts []string
			srv := Wrap(&http.Server{Addr: "127.0.0.1:0", TLSConfig: testCert.ServerConfig()})
			srv.listenUDP = func(ctx context.Context, lc net.ListenConfig, addr string) (net.PacketConn, error) {
				attempts++
				triedPorts = append(triedPorts, addr)
				if attempts <= tt.failures {
					return nil, &net.OpError{Op: "listen", Net: "udp", Err: syscall.EADDRINUSE}
				}
				return lc.ListenPacket(ctx, "udp", addr)
			}
			err := srv.ListenTLS("", "")
			defer srv.Close()
			if tt.wantErr {
				if err == nil || !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "UDP") {
					t.Fatalf("ListenTLS: %v, want EADDRINUSE naming UDP", err)
				}
				if attempts != bindAttempts {
					t.Fatalf("%d attempts, want %d", attempts, bindAttempts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if attempts != tt.failures+1 {
				t.Fatalf("%d UDP binds, want %d", attempts, tt.failures+1)
			}
			tcpPort := srv.Addr().(*net.TCPAddr).Port
			if want := fmt.Sprintf("127.0.0.1:%d", tcpPort); triedPorts[len(triedPorts)-1] != want {
				t.Fatalf("UDP bound %s, want TCP's %s", triedPorts[len(triedPorts)-1], want)
			}
		})
	}
}

func TestExplicitPortUDPTaken(t *testing.T) {
	// The kernel picks a free UDP port; the TCP port of the same number may
	// be in use (another process's listener or outgoing connection), which
	// is not the case under test: then try another port.
	var addr string
	var err error
	for attempt := 0; ; attempt++ {
		udp, lerr := net.ListenPacket("udp", "127.0.0.1:0")
		if lerr != nil {
			t.Fatal(lerr)
		}
		addr = udp.LocalAddr().String()
		srv := Wrap(&http.Server{Addr: addr, TLSConfig: testCert.ServerConfig()})
		err = srv.ListenTLS("", "")
		udp.Close()
		if err == nil {
			srv.Close()
			t.Skip("TCP and UDP both bound; the UDP port was not exclusive here")
		}
		if errors.Is(err, syscall.EADDRINUSE) && strings.Contains(err.Error(), "TCP listen") && attempt < 20 {
			continue
		}
		break
	}
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "UDP") {
		t.Fatalf("ListenTLS: %v, want EADDRINUSE naming UDP", err)
	}
	// The TCP listener of the failed attempt is closed again.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("TCP port left bound after the failure: %v", err)
	}
	ln.Close()
}

func TestReusePort(t *testing.T) {
	first := startTLS(t, &http.Server{Handler: echoProto}, func(s *Server) { s.ReusePort = true })
	addr := "127.0.0.1:" + first.port

	plain := Wrap(&http.Server{Addr: addr, TLSConfig: testCert.ServerConfig()})
	if err := plain.ListenTLS("", ""); !errors.Is(err, syscall.EADDRINUSE) {
		plain.Close()
		t.Fatalf("second listener without ReusePort: %v, want EADDRINUSE", err)
	}

	second := startTLS(t, &http.Server{Addr: addr, Handler: echoProto}, func(s *Server) { s.ReusePort = true })
	if second.port != first.port {
		t.Fatalf("second server on port %s, want %s", second.port, first.port)
	}
	for _, p := range allProtocols {
		if resp, body := get(t, newClient(t, p), first.url("/")); resp.StatusCode != 200 || body != string(p) {
			t.Errorf("%s: status %d body %q", p, resp.StatusCode, body)
		}
	}
}

func TestCleartext(t *testing.T) {
	tests := []struct {
		name  string
		h2c   bool
		proto string
	}{
		{"http1", false, "HTTP/1.1"},
		{"h2c", true, "HTTP/2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := &http.Server{Addr: "127.0.0.1:0", Handler: echoProto}
			if tt.h2c {
				hs.Protocols = new(http.Protocols)
				hs.Protocols.SetHTTP1(true)
				hs.Protocols.SetUnencryptedHTTP2(true)
			}
			srv := Wrap(hs)
			if err := srv.Listen(); err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve() }()
			defer func() {
				srv.Close()
				if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
					t.Errorf("Serve: %v", err)
				}
			}()
			if srv.PacketAddr() != nil {
				t.Error("cleartext server bound UDP")
			}
			tr := &http.Transport{Protocols: new(http.Protocols)}
			defer tr.CloseIdleConnections()
			if tt.h2c {
				tr.Protocols.SetUnencryptedHTTP2(true)
			} else {
				tr.Protocols.SetHTTP1(true)
			}
			resp, body := get(t, &http.Client{Transport: tr}, "http://"+srv.Addr().String()+"/")
			if body != tt.proto {
				t.Errorf("served over %q, want %q", body, tt.proto)
			}
			if v := resp.Header.Get("Alt-Svc"); v != "" {
				t.Errorf("cleartext response advertises %q", v)
			}
		})
	}
}
