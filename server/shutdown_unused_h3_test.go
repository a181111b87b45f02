package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// dialUnusedHTTP3 opens n QUIC connections to addr over one client
// transport and returns once the server has taken each of them (its
// control stream arrived). No request is ever sent on them and they do not
// read the control stream, so the server's GOAWAY goes unseen: only the
// server can end them. The cleanup closes the client transport.
func dialUnusedHTTP3(t *testing.T, addr string, n int) []*quic.Conn {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: udp}
	t.Cleanup(func() {
		tr.Close()
		udp.Close()
	})
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tlsConf := &tls.Config{RootCAs: testCert.Pool, NextProtos: []string{http3.NextProtoH3}}
	conns := make([]*quic.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	// A few dialers at a time: the handshakes are CPU-bound.
	sem := make(chan struct{}, 8)
	for i := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := tr.Dial(ctx, raddr, tlsConf, &quic.Config{MaxIdleTimeout: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
			if _, err := c.AcceptUniStream(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("opening an unused HTTP/3 connection: %v", err)
	}
	return conns
}

// peakGoroutines samples runtime.NumGoroutine in a tight loop while f runs
// and returns the highest count seen.
func peakGoroutines(f func()) int {
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(runtime.NumGoroutine()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	f()
	close(stop)
	<-sampled
	return int(peak.Load())
}

// TestShutdownUnusedHTTP3ConnsBoundedGoroutines checks that Shutdown closes
// many HTTP/3 connections that never carried a request without a burst of
// goroutines. quic-go's per-connection loop, once its server is shutting
// down gracefully, starts a GOAWAY writer each time it finds the
// connection's streams closed before the connection's context has ended;
// a connection closed in that window spins, and hundreds closed at once
// reached 10^4 to 10^5 goroutines. quic-go's own server (the control row)
// closes them only when Shutdown's context ends, after stopping that loop.
// Every connection is made to reach the end of its allowance together,
// 200ms into Shutdown, the case of many connections opened in a short
// while. Both ends run in this process; the bounds are generous.
func TestShutdownUnusedHTTP3ConnsBoundedGoroutines(t *testing.T) {
	const (
		conns = 300
		// Peak over the count before Shutdown: about one per connection
		// was seen (its closing); the burst reached 1,000 to 180,000 over.
		bound = 2000
		// Goroutines started during Shutdown: about 6 per connection were
		// seen; the burst started 9,000 to 2 million.
		startedBound = 10 * conns
	)
	rows := []struct {
		name  string
		start func(t *testing.T) (addr string, shutdown func(context.Context) error)
	}{
		{"quic-go http3.Server", func(t *testing.T) (string, func(context.Context) error) {
			udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			tr := &quic.Transport{Conn: udp}
			ln, err := tr.Listen(http3.ConfigureTLSConfig(testCert.ServerConfig()), nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http3.Server{Handler: echoProto}
			served := make(chan struct{})
			go func() {
				defer close(served)
				srv.ServeListener(ln)
			}()
			t.Cleanup(func() {
				srv.Close()
				ln.Close()
				<-served
				tr.Close()
				udp.Close()
			})
			shutdown := func(ctx context.Context) error {
				// quic-go leaves an unused connection to the client;
				// its Shutdown closes it when ctx ends.
				ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
				ln.Close()
				srv.Shutdown(ctx)
				return nil
			}
			return udp.LocalAddr().String(), shutdown
		}},
		{"ferry", func(t *testing.T) (string, func(context.Context) error) {
			st := startTLS(t, &http.Server{Handler: echoProto}, nil)
			shutdown := func(ctx context.Context) error {
				alignAllowance(st.srv, time.Now().Add(200*time.Millisecond))
				return st.srv.Shutdown(ctx)
			}
			return st.srv.PacketAddr().String(), shutdown
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			addr, shutdown := row.start(t)
			clients := dialUnusedHTTP3(t, addr, conns)
			// More Ps than cores let quic-go's connection loops run
			// alongside the closes, as on a server with more cores: with
			// two the burst showed in most runs, with eight in every one.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(8, runtime.GOMAXPROCS(0))))
			before := runtime.NumGoroutine()
			createdBefore := goroutinesCreated()
			var err error
			var took time.Duration
			peak := peakGoroutines(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				start := time.Now()
				err = shutdown(ctx)
				took = time.Since(start)
			})
			created := goroutinesCreated() - createdBefore
			t.Logf("%d unused connections: %d goroutines before Shutdown, peak %d, %d started, Shutdown took %v", conns, before, peak, created, took)
			if err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			// Every client is told: a connection dropped without
			// CONNECTION_CLOSE would wait for its idle timeout.
			for i, c := range clients {
				select {
				case <-c.Context().Done():
				case <-time.After(5 * time.Second):
					t.Fatalf("client %d still open 5s after Shutdown returned", i)
				}
				if appErr, ok := errors.AsType[*quic.ApplicationError](context.Cause(c.Context())); !ok || !appErr.Remote {
					t.Fatalf("client %d ended with %v, want the server's CONNECTION_CLOSE", i, context.Cause(c.Context()))
				}
			}
			if created > startedBound {
				t.Errorf("Shutdown with %d unused HTTP/3 connections started %d goroutines; want at most %d", conns, created, startedBound)
			}
			if peak-before > bound {
				t.Errorf("Shutdown with %d unused HTTP/3 connections peaked at %d goroutines, %d over the %d before; want at most %d over",
					conns, peak, peak-before, before, bound)
			}
		})
	}
}

// alignAllowance makes every connection s holds reach the end of its
// allowance as an unused connection at the same instant, at: their closes
// then all fall inside Shutdown, after quic-go's graceful shutdown began,
// however long the handshakes took.
func alignAllowance(s *Server, at time.Time) {
	for _, a := range s.quicConns.snapshot(false) {
		a.mu.Lock()
		a.start = at.Add(-a.idleAfter)
		a.mu.Unlock()
	}
}

// goroutinesCreated is the number of goroutines the program has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// TestShutdownTellsDrainedHTTP3Client checks that a client whose unused
// connection Shutdown closes receives CONNECTION_CLOSE, also when that close
// is the last thing Shutdown waits for before closing the UDP socket: quic-go
// writes it from the connection's own goroutine after the connection's
// context has ended, which closeDrained makes happen first. A client not
// told would wait for its idle timeout (a minute here). Repeated, since the
// write races with the socket's closing.
func TestShutdownTellsDrainedHTTP3Client(t *testing.T) {
	const rounds = 20
	for i := range rounds {
		st := startTLS(t, &http.Server{Handler: echoProto}, func(s *Server) { s.quicConns.idleAfter = time.Millisecond })
		c := dialUnusedHTTP3(t, st.srv.PacketAddr().String(), 1)[0]
		if err := st.srv.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		select {
		case <-c.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the client is still open 5s after Shutdown returned: not told", i)
		}
		if appErr, ok := errors.AsType[*quic.ApplicationError](context.Cause(c.Context())); !ok || !appErr.Remote {
			t.Fatalf("round %d: the client ended with %v, want the server's CONNECTION_CLOSE", i, context.Cause(c.Context()))
		}
	}
}
