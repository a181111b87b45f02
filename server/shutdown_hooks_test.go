package server

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// waitRan waits for a function given to RegisterOnShutdown to signal; the
// bound only tells "never ran" from "ran".
func waitRan(t *testing.T, ran <-chan struct{}) {
	t.Helper()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("function given to RegisterOnShutdown never ran after Shutdown")
	}
}

// TestRegisterOnShutdownEveryState checks that a function given to
// RegisterOnShutdown runs when Shutdown is called whatever the Server was
// doing, as net/http runs it (the bare row): before anything was bound, and
// when it was registered while ListenTLS was binding (reached through the
// listenUDP seam; in a program, a RegisterOnShutdown racing `go
// srv.ListenAndServeTLS`).
func TestRegisterOnShutdownEveryState(t *testing.T) {
	t.Run("bare net/http before serve", func(t *testing.T) {
		hs := &http.Server{}
		ran := make(chan struct{})
		hs.RegisterOnShutdown(func() { close(ran) })
		if err := hs.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitRan(t, ran)
	})
	t.Run("before listen", func(t *testing.T) {
		srv := Wrap(&http.Server{})
		ran := make(chan struct{})
		srv.RegisterOnShutdown(func() { close(ran) })
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitRan(t, ran)
	})
	t.Run("during start", func(t *testing.T) {
		ran := make(chan struct{})
		srv, serveDone := startWithMidStartCall(t, func(srv *Server) {
			srv.RegisterOnShutdown(func() { close(ran) })
		})
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-serveDone
		waitRan(t, ran)
	})
}

// TestRegisterOnShutdownOncePerCall checks that every Shutdown call starts
// the registered functions again, as net/http's does (the bare row).
func TestRegisterOnShutdownOncePerCall(t *testing.T) {
	type server interface {
		RegisterOnShutdown(func())
		Shutdown(context.Context) error
	}
	st := startTLS(t, &http.Server{Handler: echoProto}, nil)
	rows := []struct {
		name string
		srv  server
	}{
		{"bare net/http", &http.Server{}},
		{"wrapped, serving", st.srv},
		{"wrapped, never bound", Wrap(nil)},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			ran := make(chan struct{}, 2)
			row.srv.RegisterOnShutdown(func() { ran <- struct{}{} })
			for range 2 {
				if err := row.srv.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				waitRan(t, ran)
			}
		})
	}
}

// TestSetKeepAlivesEnabledDuringStart checks that SetKeepAlivesEnabled(false)
// called while ListenTLS is binding still reaches the TCP server: HTTP/1.1
// responses carry "Connection: close".
func TestSetKeepAlivesEnabledDuringStart(t *testing.T) {
	srv, serveDone := startWithMidStartCall(t, func(srv *Server) { srv.SetKeepAlivesEnabled(false) })
	defer func() { srv.Close(); <-serveDone }()
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	resp, _ := get(t, newClient(t, h1), "https://127.0.0.1:"+port+"/")
	if !resp.Close {
		t.Fatal("HTTP/1.1 response without Connection: close after SetKeepAlivesEnabled(false)")
	}
}

// startWithMidStartCall serves echoProto after ListenTLS, running call
// while ListenTLS binds its UDP socket, as another goroutine's call may
// land mid-start. It returns the server and a channel closed with Serve.
func startWithMidStartCall(t *testing.T, call func(*Server)) (*Server, <-chan struct{}) {
	t.Helper()
	certFile, keyFile, err := testCert.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := Wrap(&http.Server{Addr: "127.0.0.1:0", Handler: echoProto})
	srv.listenUDP = func(ctx context.Context, lc net.ListenConfig, addr string) (net.PacketConn, error) {
		call(srv)
		return lc.ListenPacket(ctx, "udp", addr)
	}
	if err := srv.ListenTLS(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	serveDone := make(chan struct{})
	go func() {
		srv.Serve()
		close(serveDone)
	}()
	return srv, serveDone
}
