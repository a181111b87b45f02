package server

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ferryhttp/ferry/internal/sockopt"
)

// TestListenerOptionsOncePerConn serves many requests over a few
// connections and counts setsockopt calls through the guard: exactly one
// per option per accepted connection, none per request, and the kernel
// holds the values.
func TestListenerOptionsOncePerConn(t *testing.T) {
	settings := []sockopt.Setting{
		{Option: sockopt.KeepIdle, Value: 17},
		{Option: sockopt.KeepInterval, Value: 5},
		{Option: sockopt.NoDelay, Value: 1},
	}
	var syscalls atomic.Int64
	var conns atomic.Int64
	var mu sync.Mutex // guards kernelIdle
	var kernelIdle []int
	hs := &http.Server{
		Handler: echoProto,
		ConnState: func(c net.Conn, s http.ConnState) {
			if s != http.StateNew {
				return
			}
			if _, ok := c.(*QUICConn); ok {
				return
			}
			conns.Add(1)
			g, err := sockopt.NewGuard(c.(*tls.Conn).NetConn().(syscall.Conn))
			if err != nil {
				t.Error(err)
				return
			}
			v, err := g.Read(sockopt.KeepIdle)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			kernelIdle = append(kernelIdle, v)
			mu.Unlock()
		},
	}
	st := startTLS(t, hs, func(s *Server) {
		s.ListenerOptions = settings
		s.newGuard = func(c syscall.Conn) (*sockopt.Guard, error) {
			return sockopt.NewGuardWithSetter(c, func(fd uintptr, f sockopt.Family, o sockopt.Option, v int) error {
				syscalls.Add(1)
				return sockopt.Setsockopt(fd, f, o, v)
			})
		}
	})
	const requestsPerConn = 20
	for _, p := range []protocol{h1, h2, h1} {
		client := newClient(t, p)
		for i := 0; i < requestsPerConn; i++ {
			if resp, body := get(t, client, st.url("/")); resp.StatusCode != 200 || body != string(p) {
				t.Fatalf("%s: status %d body %q", p, resp.StatusCode, body)
			}
		}
		client.CloseIdleConnections()
	}
	n := conns.Load()
	if n != 3 {
		t.Fatalf("%d TCP connections, want 3 (one per client)", n)
	}
	if got, want := syscalls.Load(), n*int64(len(settings)); got != want {
		t.Fatalf("%d setsockopt calls for %d connections and %d requests, want %d", got, n, 3*requestsPerConn, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range kernelIdle {
		if v != 17 {
			t.Errorf("kernel TCP_KEEPIDLE %d, want 17", v)
		}
	}
}

func TestListenerOptionsInvalid(t *testing.T) {
	tests := []struct {
		name    string
		setting sockopt.Setting
		want    error
	}{
		{"bad value", sockopt.Setting{Option: sockopt.NoDelay, Value: 2}, sockopt.ErrInvalidValue},
		{"unknown option", sockopt.Setting{Option: sockopt.Option(99), Value: 1}, sockopt.ErrUnknownOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := Wrap(&http.Server{Addr: "127.0.0.1:0", TLSConfig: testCert.ServerConfig()})
			srv.ListenerOptions = []sockopt.Setting{tt.setting}
			err := srv.ListenTLS("", "")
			if !errors.Is(err, tt.want) {
				srv.Close()
				t.Fatalf("ListenTLS: %v, want %v", err, tt.want)
			}
			if srv.Addr() != nil {
				t.Fatal("sockets left bound after the failure")
			}
		})
	}
}
