package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// plan is what Listen* prepares before any socket is bound, so that bad
// configuration fails without side effects.
type plan struct {
	inner    *http.Server // serves TCP
	useTLS   bool
	h3       *http3.Server // nil: no HTTP/3
	quicTLS  *tls.Config
	quicConf *quic.Config
}

// copyHTTPServer returns a new http.Server holding every exported field of
// src. Reflection keeps it complete when Go adds a field; the unexported
// state (mutexes, tracked connections) starts fresh.
func copyHTTPServer(src *http.Server) *http.Server {
	dst := &http.Server{}
	sv, dv := reflect.ValueOf(src).Elem(), reflect.ValueOf(dst).Elem()
	t := sv.Type()
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() {
			dv.Field(i).Set(sv.Field(i))
		}
	}
	return dst
}

// prepare builds the servers from the user's http.Server and the wrapper's
// options. With TLS it loads the key pair (certFile/keyFile, or TLSConfig's
// own certificate when both are empty).
func (s *Server) prepare(useTLS, withH3 bool, certFile, keyFile string) (*plan, error) {
	if s.AltSvcMaxAge < 0 {
		return nil, fmt.Errorf("server: negative AltSvcMaxAge %v", s.AltSvcMaxAge)
	}
	if err := checkQUICRetryThreshold(s.QUICRetryThreshold); err != nil {
		return nil, err
	}
	p := &plan{inner: copyHTTPServer(s.hs), useTLS: useTLS}
	handler := p.inner.Handler
	if handler == nil {
		handler = http.DefaultServeMux
	}
	if useTLS {
		tcpTLS, quicTLS, err := tlsConfigs(p.inner.TLSConfig, certFile, keyFile)
		if err != nil {
			return nil, err
		}
		p.inner.TLSConfig = tcpTLS
		if withH3 {
			p.quicTLS = quicTLS
			p.quicConf = quicConfig(s.QUICConfig, p.inner)
			p.h3 = newHTTP3Server(p.inner, handler, &s.quicConns)
			p.inner.Handler = &altSvcHandler{s: s, next: handler}
		}
	}
	return p, nil
}

// begin moves the Server from idle to starting, or reports why it cannot.
func (s *Server) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateIdle:
		s.state = stateStarting
		return nil
	case stateClosed:
		return http.ErrServerClosed
	default:
		return ErrAlreadyStarted
	}
}

// abort returns a Server whose start failed to idle, so it may be retried.
func (s *Server) abort() {
	s.mu.Lock()
	if s.state == stateStarting {
		s.state = stateIdle
	}
	s.mu.Unlock()
}

// Listen binds the TCP listener for cleartext serving (HTTP/1.1, and h2c
// when the http.Server's Protocols enable unencrypted HTTP/2) on
// http.Server.Addr (":http" when empty). HTTP/3 and Alt-Svc need TLS and
// are not used. Call Serve next.
func (s *Server) Listen() error {
	return s.listen(false, "", "")
}

// ListenTLS loads the key pair and binds TCP on http.Server.Addr (":https"
// when empty) and, unless DisableHTTP3, UDP on the same port. certFile and
// keyFile may both be empty when TLSConfig carries a certificate. Errors
// name the file at fault. Call Serve next.
func (s *Server) ListenTLS(certFile, keyFile string) error {
	return s.listen(true, certFile, keyFile)
}

func (s *Server) listen(useTLS bool, certFile, keyFile string) error {
	if err := s.begin(); err != nil {
		return err
	}
	withH3 := useTLS && !s.DisableHTTP3
	p, err := s.prepare(useTLS, withH3, certFile, keyFile)
	if err != nil {
		s.abort()
		return err
	}
	addr := p.inner.Addr
	if addr == "" {
		addr = ":http"
		if useTLS {
			addr = ":https"
		}
	}
	tcp, udp, err := s.bind(context.Background(), addr, withH3)
	if err != nil {
		s.abort()
		return err
	}
	return s.adopt(p, tcp, udp)
}

// ServeTLS serves TLS on l (HTTP/1.1 and HTTP/2) and HTTP/3 on pc, taking
// ownership of both: they are closed by Shutdown and Close. pc may be nil,
// which serves TCP only; a non-nil pc with DisableHTTP3 set is an error.
// Alt-Svc advertises pc's port. Certificates are as for ListenTLS. It
// returns as Serve does.
func (s *Server) ServeTLS(l net.Listener, pc net.PacketConn, certFile, keyFile string) error {
	if l == nil {
		return errors.New("server: ServeTLS with a nil listener")
	}
	if pc != nil && s.DisableHTTP3 {
		return errors.New("server: ServeTLS given a PacketConn while DisableHTTP3 is set")
	}
	if err := s.begin(); err != nil {
		return err
	}
	p, err := s.prepare(true, pc != nil, certFile, keyFile)
	if err != nil {
		s.abort()
		return err
	}
	if err := s.adopt(p, l, pc); err != nil {
		return err
	}
	return s.Serve()
}

// adopt installs the bound sockets and the QUIC listener; on failure it
// closes them. It is called in stateStarting.
func (s *Server) adopt(p *plan, tcp net.Listener, udp net.PacketConn) error {
	closeAll := func() {
		tcp.Close()
		if udp != nil {
			udp.Close()
		}
	}
	if sc, ok := tcp.(syscall.Conn); ok {
		if err := validateSettings(sc, s.ListenerOptions); err != nil {
			closeAll()
			s.abort()
			return fmt.Errorf("server: ListenerOptions: %w", err)
		}
	}
	var ln net.Listener = tcp
	if len(s.ListenerOptions) > 0 {
		ln = &optionListener{
			Listener: tcp,
			settings: append(s.ListenerOptions[:0:0], s.ListenerOptions...),
			newGuard: s.newGuard,
			errorLog: p.inner.ErrorLog,
		}
	}
	var tr *quic.Transport
	var qln http3.QUICListener
	var gauge *handshakeGauge
	if udp != nil {
		base := context.Background()
		if p.inner.BaseContext != nil {
			base = p.inner.BaseContext(packetListener{pc: udp})
			if base == nil {
				panic("server: BaseContext returned a nil context") // as net/http
			}
		}
		var verify func(net.Addr) bool
		verify, gauge = verifySourceAddress(s.QUICRetryThreshold)
		tr = &quic.Transport{
			Conn:                udp,
			ConnContext:         quicConnContext(base, gauge),
			VerifySourceAddress: verify,
		}
		var err error
		if p.quicConf.Allow0RTT {
			qln, err = tr.ListenEarly(p.quicTLS, p.quicConf)
		} else {
			qln, err = tr.Listen(p.quicTLS, p.quicConf)
		}
		if err != nil {
			tr.Close()
			closeAll()
			s.abort()
			return fmt.Errorf("server: QUIC listen: %w", err)
		}
	}

	s.mu.Lock()
	if s.state != stateStarting { // Shutdown or Close ran meanwhile
		s.mu.Unlock()
		if qln != nil {
			qln.Close()
			tr.Close()
		}
		closeAll()
		return http.ErrServerClosed
	}
	s.state = stateBound
	s.tcp, s.udp = ln, udp
	s.inner, s.h3, s.useTLS = p.inner, p.h3, p.useTLS
	s.transport, s.quicLn, s.handshakes = tr, qln, gauge
	if s.keepAlives != nil {
		// Applied under mu so that a SetKeepAlivesEnabled racing with this
		// start cannot be overtaken by an older value. Not blocking: inner
		// has no connection to close yet, Serve has not been called.
		s.inner.SetKeepAlivesEnabled(*s.keepAlives)
	}
	s.mu.Unlock()
	return nil
}

// Serve serves the sockets bound by Listen or ListenTLS until Shutdown or
// Close, then returns http.ErrServerClosed once both the TCP and the HTTP/3
// accept loops have stopped (in-flight requests may still be finishing: wait
// for Shutdown to return). If either loop fails, everything is closed and
// that error is returned. It returns ErrNotListening when nothing is bound.
func (s *Server) Serve() error {
	s.mu.Lock()
	switch s.state {
	case stateBound:
	case stateClosed:
		s.mu.Unlock()
		return http.ErrServerClosed
	case stateServing:
		s.mu.Unlock()
		return ErrAlreadyStarted
	default:
		s.mu.Unlock()
		return ErrNotListening
	}
	s.state = stateServing
	inner, tcp, h3, qln, udp, useTLS := s.inner, s.tcp, s.h3, s.quicLn, s.udp, s.useTLS
	done := make(chan struct{})
	s.serveDone = done
	if port := udpPort(udp); h3 != nil && port != 0 {
		// Stored under mu so that a concurrent stop, which clears it under
		// mu, cannot be overtaken. A socket without a UDP port (a custom
		// PacketConn given to ServeTLS) serves HTTP/3 unadvertised.
		v := altSvcValue(port, s.altSvcMaxAge())
		s.altSvc.Store(&v)
	}
	s.mu.Unlock()

	h3Err := make(chan error, 1)
	if h3 != nil {
		go func() {
			defer close(done)
			err := h3.ServeListener(qln)
			if !errors.Is(err, http.ErrServerClosed) {
				s.closeNow() // an HTTP/3 failure takes TCP down too
			}
			h3Err <- err
		}()
	} else {
		close(done)
		h3Err <- http.ErrServerClosed
	}

	var err error
	if useTLS {
		err = inner.ServeTLS(tcp, "", "")
	} else {
		err = inner.Serve(tcp)
	}
	if !errors.Is(err, http.ErrServerClosed) {
		s.closeNow()
	}
	err3 := <-h3Err
	switch {
	case !errors.Is(err, http.ErrServerClosed):
		return err
	case err3 != nil && !errors.Is(err3, http.ErrServerClosed):
		return fmt.Errorf("server: HTTP/3: %w", err3)
	}
	return http.ErrServerClosed
}

// ListenAndServe is Listen followed by Serve.
func (s *Server) ListenAndServe() error {
	if err := s.Listen(); err != nil {
		return err
	}
	return s.Serve()
}

// ListenAndServeTLS is ListenTLS followed by Serve.
func (s *Server) ListenAndServeTLS(certFile, keyFile string) error {
	if err := s.ListenTLS(certFile, keyFile); err != nil {
		return err
	}
	return s.Serve()
}

// altSvcMaxAge is AltSvcMaxAge with the default applied.
func (s *Server) altSvcMaxAge() time.Duration {
	if s.AltSvcMaxAge == 0 {
		return DefaultAltSvcMaxAge
	}
	return s.AltSvcMaxAge
}

// udpPort is the port pc is bound to, or 0 if it is not a UDP socket.
func udpPort(pc net.PacketConn) int {
	if pc == nil {
		return 0
	}
	if a, ok := pc.LocalAddr().(*net.UDPAddr); ok {
		return a.Port
	}
	return 0
}
