package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/ferryhttp/ferry/internal/sockopt"
)

// DefaultAltSvcMaxAge is the Alt-Svc max-age advertised when
// Server.AltSvcMaxAge is zero: one day, as RFC 7838's default.
const DefaultAltSvcMaxAge = 24 * time.Hour

// ErrNotListening is returned by Serve when neither Listen nor ListenTLS
// succeeded before it.
var ErrNotListening = errors.New("server: Serve called before Listen or ListenTLS")

// ErrAlreadyStarted is returned by the Listen and Serve methods when the
// Server is already listening or serving; a Server serves once.
var ErrAlreadyStarted = errors.New("server: already started")

// Server serves a wrapped *http.Server over HTTP/1.1, HTTP/2 and HTTP/3.
// Create it with Wrap; set the exported fields before Listen*/ServeTLS.
// A Server serves once: after Shutdown or Close it cannot be restarted.
type Server struct {
	// DisableHTTP3 turns HTTP/3 off: only TCP is bound and no Alt-Svc is
	// sent. The zero value serves HTTP/3 alongside TLS.
	DisableHTTP3 bool

	// AltSvcMaxAge is the max-age ("ma") advertised in Alt-Svc, rounded down
	// to whole seconds. Zero means DefaultAltSvcMaxAge; negative is an error
	// at listen time.
	AltSvcMaxAge time.Duration

	// ListenerOptions are socket options applied to every accepted TCP
	// connection, once, right after accept, through a sockopt.Guard. Values
	// are validated at listen time (a bad one fails Listen/ListenTLS); a
	// setsockopt the kernel refuses later is logged to ErrorLog and the
	// connection is served anyway. Nil applies nothing and leaves the
	// listener unwrapped.
	ListenerOptions []sockopt.Setting

	// ReusePort sets SO_REUSEPORT on the TCP and UDP sockets before bind, so
	// several processes or Servers can listen on one port and the kernel
	// spreads connections among them.
	ReusePort bool

	// QUICConfig is the QUIC configuration for HTTP/3; nil means quic-go's
	// defaults with the handshake timeout taken from the http.Server's
	// timeouts. It is cloned; the HandshakeIdleTimeout is only filled in
	// when zero. When the http.Server bounds request headers
	// (ReadHeaderTimeout or ReadTimeout), the clone's Tracer is the
	// wrapper's, which passes every event on to this Tracer if set (see
	// the package documentation).
	QUICConfig *quic.Config

	// QUICRetryThreshold decides when a new HTTP/3 client must prove it
	// owns its source address with a QUIC Retry (one extra round trip)
	// before the server keeps any state for it. Without that proof quic-go
	// creates a connection (four goroutines, its buffers) for every Initial
	// packet and keeps it until the handshake timeout, so a flood of
	// spoofed or abandoned Initials costs memory and goroutines in
	// proportion. A positive value n sends a Retry to clients without a
	// token while n or more handshakes are half-open (created and neither
	// accepted by HTTP/3 nor closed); below that, no round trip is added.
	// Zero means DefaultQUICRetryThreshold (64). QUICRetryAlways validates
	// every new connection; QUICRetryNever never does (quic-go's default).
	// Any other negative value is an error at listen time. A client that
	// presents a valid address token (a Retry's, or one from an earlier
	// connection when it keeps a quic.TokenStore) is not asked again.
	QUICRetryThreshold int

	hs *http.Server // the user's server; read, never written

	// newGuard makes the sockopt guard for each accepted connection; tests
	// replace it to count syscalls.
	newGuard func(syscall.Conn) (*sockopt.Guard, error)

	// listenUDP, when set, replaces net.ListenConfig.ListenPacket for the
	// HTTP/3 socket; tests use it to make a UDP port look taken.
	listenUDP func(ctx context.Context, lc net.ListenConfig, addr string) (net.PacketConn, error)

	// quicConns tracks open HTTP/3 connections for Close.
	quicConns quicConns

	// altSvc is the Alt-Svc value TCP responses carry; nil or "" sends none.
	altSvc atomic.Pointer[string]

	// mu guards the fields below. Nothing blocking runs under it: closes,
	// Serve and Shutdown calls happen after it is released.
	mu         sync.Mutex
	state      state
	tcp        net.Listener   // the bound TCP listener (wrapped for options)
	udp        net.PacketConn // the bound UDP socket; nil without HTTP/3
	inner      *http.Server   // serves TCP, a copy of hs
	useTLS     bool           // inner serves TLS
	h3         *http3.Server  // serves HTTP/3; nil without it
	transport  *quic.Transport
	quicLn     http3.QUICListener
	handshakes *handshakeGauge // half-open HTTP/3 handshakes; nil when not counted
	onShutdown []func()        // appended only, so a copy of the slice header is a stable snapshot
	keepAlives *bool           // last SetKeepAlivesEnabled value, nil if never called
	serveDone  chan struct{}   // closed when Serve's HTTP/3 goroutine ended
	closed     chan struct{}   // closed by Close; made by the first stop
	closeDone  bool            // closed has been closed
}

type state int

const (
	stateIdle     state = iota // nothing bound
	stateStarting              // Listen* or ServeTLS preparing and binding
	stateBound                 // Listen* succeeded, Serve not called
	stateServing               // Serve running
	stateClosed                // Shutdown or Close called
)

// Wrap returns a Server that serves hs (a nil hs serves a zero
// http.Server). hs itself is never modified; its exported fields are copied
// when listening starts. Hooks registered with hs.RegisterOnShutdown,
// including the one golang.org/x/net's http2.ConfigureServer registers to
// send GOAWAY to idle HTTP/2 clients, do not run on the wrapper's Shutdown
// (see the package contract).
func Wrap(hs *http.Server) *Server {
	if hs == nil {
		hs = &http.Server{} // a nil server would panic later; serve defaults
	}
	return &Server{hs: hs, newGuard: sockopt.NewGuard}
}

// HTTPServer returns the *http.Server passed to Wrap.
func (s *Server) HTTPServer() *http.Server { return s.hs }

// Addr returns the address the TCP listener is bound to, or nil before
// Listen/ListenTLS/ServeTLS bound one. With port 0 in http.Server.Addr it
// holds the port the kernel chose.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tcp == nil {
		return nil
	}
	return s.tcp.Addr()
}

// PacketAddr returns the address of the UDP socket serving HTTP/3, or nil
// when HTTP/3 is not bound.
func (s *Server) PacketAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.udp == nil {
		return nil
	}
	return s.udp.LocalAddr()
}

// AltSvc returns the Alt-Svc value TCP responses currently carry, or "" when
// none is sent.
func (s *Server) AltSvc() string {
	if p := s.altSvc.Load(); p != nil {
		return *p
	}
	return ""
}

// RegisterOnShutdown registers f to run, in its own goroutine, each time
// Shutdown is called, whether or not the Server was serving (as
// http.Server.RegisterOnShutdown). Close does not run it. Functions
// registered on the wrapped *http.Server are not visible to the wrapper.
func (s *Server) RegisterOnShutdown(f func()) {
	s.mu.Lock()
	s.onShutdown = append(s.onShutdown, f)
	s.mu.Unlock()
}

// runOnShutdown starts every function given to RegisterOnShutdown.
func (s *Server) runOnShutdown() {
	s.mu.Lock()
	hooks := s.onShutdown
	s.mu.Unlock()
	for _, f := range hooks {
		go f()
	}
}

// SetKeepAlivesEnabled forwards to the TCP server's SetKeepAlivesEnabled;
// it may be called at any time, the last value applying once serving
// starts. HTTP/3 has no equivalent.
func (s *Server) SetKeepAlivesEnabled(v bool) {
	s.mu.Lock()
	s.keepAlives = &v
	inner := s.inner
	s.mu.Unlock()
	if inner != nil {
		inner.SetKeepAlivesEnabled(v)
	}
}

// tlsCertificates reports whether cfg can present a certificate on its own.
func tlsHasCert(cfg *tls.Config) bool {
	return cfg != nil && (len(cfg.Certificates) > 0 || cfg.GetCertificate != nil || cfg.GetConfigForClient != nil)
}
