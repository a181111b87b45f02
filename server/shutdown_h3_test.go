package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// contextDeafHandler ignores its request context: it answers only when
// release is closed, like a handler blocked in work that takes no context
// (a syscall, a lock, a CPU-bound loop).
type contextDeafHandler struct {
	entered chan struct{}
	release chan struct{}
}

func (h *contextDeafHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.entered <- struct{}{}
	<-h.release
	w.Write([]byte("late"))
}

// startDeafRequest serves a contextDeafHandler and returns once a request
// over p is inside it. release lets the handler answer (it may be called
// more than once); the test's cleanup releases it and waits for the
// request, so nothing outlives the test.
func startDeafRequest(t *testing.T, p protocol) (st *started, release func()) {
	t.Helper()
	h := &contextDeafHandler{entered: make(chan struct{}, 1), release: make(chan struct{})}
	st = startTLS(t, &http.Server{Handler: h}, nil)
	inFlight := fetch(newClient(t, p), st.url("/"))
	<-h.entered
	var once sync.Once
	release = func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(func() {
		release()
		<-inFlight
	})
	return st, release
}

// TestShutdownContextEndsWhileHandlerIgnoresIt checks that Shutdown returns
// the context's error once its context ends, even though a handler that
// ignores its context is still running, on HTTP/3 as net/http does on
// HTTP/2 (the control row). The HTTP/3 handler finishes in the background;
// TestMain's leak check sees that nothing is left once it has returned.
func TestShutdownContextEndsWhileHandlerIgnoresIt(t *testing.T) {
	// Shutdown has to return soon after its 100ms context; this bound only
	// tells a hang from a pass.
	const hangBound = 10 * time.Second
	for _, p := range []protocol{h2, h3} {
		t.Run(string(p), func(t *testing.T) {
			st, release := startDeafRequest(t, p)

			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- st.srv.Shutdown(ctx) }()
			select {
			case err := <-done:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Shutdown: %v, want context.DeadlineExceeded", err)
				}
			case <-time.After(hangBound):
				t.Errorf("Shutdown still blocked %v after its context ended, with the handler running", hangBound)
				release()
				<-done
			}
		})
	}
}

// TestShutdownClosesIdleClients checks which idle clients Shutdown closes.
// A client that connected and never sent a request does not hold Shutdown:
// net/http closes such a TCP connection (the control row: a new connection
// counts idle after 5s), and an HTTP/3 one is closed drainIdleAfter after
// its start. An HTTP/3 client that made a request, keeps sending and
// ignores GOAWAY keeps its connection, and Shutdown waits for its context,
// as quic-go's own Shutdown does: closing a used QUIC connection could
// discard a response not yet read (TestShutdownDeliversSlowHTTP3Download);
// only a silent one is closed (TestShutdownClosesSilentClients). That row
// cuts the allowance to 1ms and gives Shutdown more than goAwayGrace, so a
// wrong closing would show as a nil Shutdown. The QUIC clients keep the
// connection alive with PINGs, so only the server can end it.
func TestShutdownClosesIdleClients(t *testing.T) {
	// drainIdleAfter (5s) plus slack; this bound only tells a hang (until
	// the context ends) from a pass.
	const patience = 15 * time.Second
	quicDial := func(t *testing.T, addr string) *quic.Conn {
		conn, err := quic.DialAddr(context.Background(), addr,
			&tls.Config{RootCAs: testCert.Pool, NextProtos: []string{http3.NextProtoH3}},
			&quic.Config{KeepAlivePeriod: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	rows := []struct {
		name string
		// connect leaves one idle client connected to addr and returns its
		// close.
		connect   func(t *testing.T, addr string) (closeConn func())
		idleAfter time.Duration // 0: drainIdleAfter
		timeout   time.Duration // Shutdown's context
		want      error
	}{
		{"TCP never used", func(t *testing.T, addr string) func() {
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: testCert.Pool, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			return func() { c.Close() }
		}, 0, patience, nil},
		{"HTTP/3 never used", func(t *testing.T, addr string) func() {
			conn := quicDial(t, addr)
			// The server's control stream (its SETTINGS) shows that the
			// server has taken the connection; the stream is not read
			// further, so its GOAWAY goes unseen.
			if _, err := conn.AcceptUniStream(context.Background()); err != nil {
				t.Fatal(err)
			}
			return func() { conn.CloseWithError(0, "") }
		}, 0, patience, nil},
		{"HTTP/3 after a request, GOAWAY ignored", func(t *testing.T, addr string) func() {
			conn := quicDial(t, addr)
			// A raw client conn whose unidirectional streams are never
			// handed to it: it does not see the server's GOAWAY.
			cc := (&http3.Transport{}).NewRawClientConn(conn)
			req, _ := http.NewRequest("GET", "https://"+addr+"/", nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != string(h3) {
				t.Fatalf("request before going idle: %q, %v", b, err)
			}
			return func() { conn.CloseWithError(0, "") }
		}, time.Millisecond, goAwayGrace * 5 / 2, context.DeadlineExceeded},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			st := startTLS(t, &http.Server{Handler: echoProto}, func(s *Server) { s.quicConns.idleAfter = row.idleAfter })
			closeConn := row.connect(t, net.JoinHostPort("127.0.0.1", st.port))
			defer closeConn()
			ctx, cancel := context.WithTimeout(context.Background(), row.timeout)
			defer cancel()
			if err := st.srv.Shutdown(ctx); !errors.Is(err, row.want) {
				t.Fatalf("Shutdown with one idle client: %v, want %v", err, row.want)
			}
		})
	}
}

// TestShutdownDeliversSlowHTTP3Download checks that Shutdown does not cut
// a response its handler has finished writing but the client has not read
// yet: a slow reader gets every byte and io.EOF, and Shutdown returns nil
// once the client, having seen GOAWAY, closes the connection. The
// allowance is cut to 1ms, and once the handler has returned the client
// reads the rest (its receive window, half a megabyte) over about 2.5s,
// past goAwayGrace: a connection closed once its handler returned, or a
// grace period after that without regard to the client still reading,
// would lose the data the client holds unread.
func TestShutdownDeliversSlowHTTP3Download(t *testing.T) {
	const size = 2 << 20 // well over quic-go's flow-control windows
	// Reading 16KiB per slowPause once the handler returned: 200KiB/s.
	const slowPause = 80 * time.Millisecond
	payload := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	returned := make(chan struct{})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.Write(payload)
	})}
	st := startTLS(t, hs, func(s *Server) { s.quicConns.idleAfter = time.Millisecond })
	resp, err := newClient(t, h3).Get(st.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- st.srv.Shutdown(context.Background()) }()
	var got int
	var rerr error
	readsAfterReturn := 0 // reads that began after the handler returned
	buf := make([]byte, 16<<10)
	for {
		select {
		case <-returned:
			readsAfterReturn++
		default:
		}
		n, err := resp.Body.Read(buf)
		got += n
		if err != nil {
			rerr = err
			break
		}
		pause := 5 * time.Millisecond
		if readsAfterReturn > 0 {
			pause = slowPause
		}
		time.Sleep(pause)
	}
	if got != size || rerr != io.EOF {
		t.Errorf("response truncated at %d of %d bytes by Shutdown: %v", got, size, rerr)
	}
	// The handler's Write returns once the last bytes are sent; they sit
	// unread in the client's receive window, so reads must follow, for
	// longer than goAwayGrace.
	if after := time.Duration(readsAfterReturn) * slowPause; after < goAwayGrace*3/2 {
		t.Errorf("%d reads (%v) after the handler returned; the test did not read a finished response past goAwayGrace", readsAfterReturn, after)
	}
	if err := <-shutdownDone; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestShutdownKeepsBusyHTTP3Connections checks that the idle closing never
// takes a connection with a handler running, nor its response once the
// handler returned: with the allowance cut to 1ms, a request in flight
// while Shutdown waits still completes. The second row's ConnContext does
// not derive from the context it is given (net/http allows it; only values
// are lost): that must not hide the connection's handlers from Shutdown.
func TestShutdownKeepsBusyHTTP3Connections(t *testing.T) {
	type userKey struct{}
	rows := []struct {
		name        string
		connContext func(context.Context, net.Conn) context.Context
	}{
		{"no ConnContext", nil},
		{"ConnContext from context.Background", func(context.Context, net.Conn) context.Context {
			return context.WithValue(context.Background(), userKey{}, 1)
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h := newBlockingHandler()
			hs := &http.Server{Handler: h, ConnContext: row.connContext}
			st := startTLS(t, hs, func(s *Server) { s.quicConns.idleAfter = time.Millisecond })
			inFlight := fetch(newClient(t, h3), st.url("/"))
			<-h.entered
			shutdownDone := make(chan error, 1)
			go func() { shutdownDone <- st.srv.Shutdown(context.Background()) }()
			// Once Serve has returned Shutdown is under way; the pause
			// gives a wrong 1ms closing ample time to act.
			st.waitServe()
			time.Sleep(100 * time.Millisecond)
			close(h.release)
			if r := <-inFlight; r.err != nil || r.status != 200 || r.body != "done" {
				t.Fatalf("request in flight during Shutdown: %+v, want 200 \"done\"", r)
			}
			if err := <-shutdownDone; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
		})
	}
}
