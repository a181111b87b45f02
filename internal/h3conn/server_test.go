package h3conn

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/quic-go/quic-go/http3"
)

// h3Server is an in-process quic-go HTTP/3 server on a loopback UDP port.
type h3Server struct {
	srv  *http3.Server
	udp  *net.UDPConn
	cert *selfsigned.Cert
	done chan struct{}

	mu   sync.Mutex // guards snis
	snis []string   // ServerName of every ClientHello seen
}

// startH3 serves h with a certificate for certHosts on 127.0.0.1.
func startH3(t testing.TB, h http.Handler, certHosts ...string) *h3Server {
	t.Helper()
	cert, err := selfsigned.New(certHosts...)
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &h3Server{udp: udp, cert: cert, done: make(chan struct{})}
	base := cert.ServerConfig()
	base.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		s.mu.Lock()
		s.snis = append(s.snis, hello.ServerName)
		s.mu.Unlock()
		return nil, nil
	}
	s.srv = &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(base)}
	go func() {
		defer close(s.done)
		s.srv.Serve(udp)
	}()
	t.Cleanup(s.close)
	return s
}

func (s *h3Server) close() {
	s.srv.Close()
	s.udp.Close()
	<-s.done
}

// addr is the "127.0.0.1:port" the server listens on.
func (s *h3Server) addr() string { return s.udp.LocalAddr().String() }

func (s *h3Server) serverNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.snis...)
}

// clientConfig trusts the server's certificate only.
func (s *h3Server) clientConfig() *tls.Config { return &tls.Config{RootCAs: s.cert.Pool} }

// newTestDialer returns a Dialer trusting s, closed at cleanup.
func newTestDialer(t testing.TB, s *h3Server, mod func(*Config)) *Dialer {
	t.Helper()
	cfg := Config{TLSConfig: s.clientConfig(), HandshakeTimeout: 10 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	d := NewDialer(cfg)
	t.Cleanup(func() { d.Close() })
	return d
}

// dialTest dials s as origin "localhost".
func dialTest(t testing.TB, d *Dialer, s *h3Server) *Conn {
	t.Helper()
	c, err := d.Dial(context.Background(), "localhost", s.addr())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	return c
}

// countFDs is the number of open file descriptors of the process.
func countFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// blackhole is a UDP socket on loopback that reads and drops every packet:
// a network that swallows QUIC.
type blackhole struct {
	udp  *net.UDPConn
	done chan struct{}
}

func startBlackhole(t testing.TB) *blackhole {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{udp: udp, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		buf := make([]byte, 2048)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		udp.Close()
		<-b.done
	})
	return b
}

func (b *blackhole) addr() string { return b.udp.LocalAddr().String() }
