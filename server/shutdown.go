package server

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// running is a snapshot of what is open, taken under mu so that the
// closing itself happens outside it.
type running struct {
	inner     *http.Server
	tcp       net.Listener
	udp       net.PacketConn
	h3        *http3.Server
	transport *quic.Transport
	quicLn    http3.QUICListener
	serveDone chan struct{}
	closed    <-chan struct{} // closed by Close
}

// stop marks the Server closed, stops advertising HTTP/3 and returns what
// must be shut.
func (s *Server) stop() running {
	s.mu.Lock()
	s.state = stateClosed
	r := running{
		inner: s.inner, tcp: s.tcp, udp: s.udp, h3: s.h3,
		transport: s.transport, quicLn: s.quicLn, serveDone: s.serveDone,
	}
	if s.closed == nil {
		s.closed = make(chan struct{})
	}
	r.closed = s.closed
	s.altSvc.Store(nil)
	s.mu.Unlock()
	return r
}

// Shutdown gracefully stops the Server: it stops advertising HTTP/3, closes
// the TCP listener and the QUIC listener (new connections are refused),
// sends HTTP/3 GOAWAY, closes idle TCP connections, waits for in-flight
// requests on every protocol to finish, then closes the UDP socket and
// returns. An HTTP/3 connection on which no handler ever ran is closed once
// it is 5 seconds old; one that ran handlers is closed once none runs and
// its client has sent nothing for a second (goAwayGrace, or the
// IdleTimeout when shorter), and is otherwise left for the client to close
// after GOAWAY, or until ctx ends (see the package contract).
// Functions given to RegisterOnShutdown start when it begins.
//
// If ctx ends first, Shutdown returns ctx's error at once, as net/http's
// does: HTTP/3 connections are closed (their request contexts are
// cancelled), open TCP connections are left as net/http leaves them (call
// Close), and handlers that ignore their context keep running. For the
// HTTP/3 ones, one goroutine of ours waits in the background and quic-go
// keeps one per connection on which a handler runs; they exit when the
// last handler has returned.
// Shutdown before anything was bound starts the RegisterOnShutdown
// functions, returns nil and makes the Server unusable, as every later call
// does.
func (s *Server) Shutdown(ctx context.Context) error {
	r := s.stop()
	s.runOnShutdown()
	if r.inner == nil {
		return nil
	}
	var h3Done chan error
	if r.h3 != nil {
		// Refuse new QUIC connections first; established ones get GOAWAY
		// from http3.Server.Shutdown and finish their requests.
		r.quicLn.Close()
		h3Done = make(chan error, 1)
		// When ctx ends, http3.Server.Shutdown closes the connections and
		// then waits for every handler to return, however long that takes.
		// net/http returns at once instead, so this goroutine is not waited
		// for past ctx: it exits when the last HTTP/3 handler returns.
		go func() { h3Done <- r.h3.Shutdown(ctx) }()
		// GOAWAY alone leaves a connection open until the client closes it;
		// close those never used, as net/http closes new idle connections,
		// and those whose client went silent after its requests.
		s.quicConns.drain()
	}
	tcpErr := r.inner.Shutdown(ctx)
	var h3Err error
	if h3Done != nil {
		select {
		case h3Err = <-h3Done:
		case <-r.closed:
			// Close dropped every connection; handlers still running
			// finish in the background, and net/http's Shutdown returns
			// nil once Close has emptied it.
		case <-ctx.Done():
			s.quicConns.closeAll()
			h3Err = ctx.Err()
		}
	}
	// The TCP listener is not tracked by the http.Server when Serve had not
	// reached it; closing it after http.Server.Shutdown (never before, or
	// Serve would report the closed listener as an accept error) covers
	// that. A second close fails harmlessly.
	r.tcp.Close()
	if r.h3 != nil {
		s.quicConns.settle()
	}
	s.closeQUIC(r)
	if r.serveDone != nil {
		<-r.serveDone
	}
	if tcpErr != nil {
		return tcpErr
	}
	return h3Err
}

// Close ends the Server at once: listeners and every connection on all
// protocols are closed, and in-flight requests see their contexts
// cancelled. Like http.Server.Close it does not wait for handlers to
// return; an HTTP/3 handler still running finishes in the background,
// with a goroutine of ours and one of quic-go's per connection waiting for
// it (see the package contract). A Shutdown running or called later
// returns nil without waiting for such handlers, as net/http's does after
// Close. It returns the first error from closing the listeners.
func (s *Server) Close() error {
	r := s.stop()
	err := s.closeRunning(r)
	if r.serveDone != nil {
		<-r.serveDone
	}
	return err
}

// closeNow is Close without waiting for Serve's HTTP/3 goroutine, for use
// from that goroutine or from Serve itself.
func (s *Server) closeNow() {
	s.closeRunning(s.stop())
}

func (s *Server) closeRunning(r running) error {
	s.mu.Lock()
	if !s.closeDone {
		s.closeDone = true
		close(s.closed) // made by stop
	}
	s.mu.Unlock()
	if r.inner == nil {
		return nil
	}
	err := r.inner.Close()
	if cerr := r.tcp.Close(); err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	if r.h3 != nil {
		r.quicLn.Close()
		// Every QUIC connection is closed now, with CONNECTION_CLOSE, which
		// cancels its request contexts. http3.Server.Close then waits for
		// handlers to return, so it runs in the background: net/http's
		// Close does not wait for handlers either.
		s.quicConns.closeAll()
		s.closeQUIC(r)
		go r.h3.Close()
	}
	return err
}

// closeQUIC closes the QUIC transport (and with it every QUIC connection)
// and the UDP socket.
func (s *Server) closeQUIC(r running) {
	if r.transport != nil {
		r.transport.Close()
	}
	if r.udp != nil {
		r.udp.Close()
	}
}
