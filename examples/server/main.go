// Command server serves a directory over HTTP/1.1 and HTTP/2 (TCP) and
// HTTP/3 (UDP) on one port, with a certificate generated at start-up for
// localhost, 127.0.0.1 and ::1. It is ferry's server wrapper around a plain
// http.Server whose handler is http.FileServer: the handler and the
// http.Server fields are the ones any Go service already has.
//
//	go run ./examples/server -dir . -addr 127.0.0.1:8443
//
// It prints the URL, the Alt-Svc header TCP responses carry (how clients
// learn about HTTP/3), and curl commands to try each protocol. SIGINT or
// SIGTERM shuts down all three protocols gracefully: in-flight requests
// finish, then the process exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/server"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", ".", "directory to serve")
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8443", "TCP and UDP address to listen on")
	flag.Parse()
	cfg.out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

type config struct {
	dir  string
	addr string
	out  io.Writer
	// ready, if set, is called with the server's https URL and the CA
	// certificate file once it serves (tests).
	ready func(url, caFile string)
}

// shutdownGrace bounds how long in-flight requests may take to finish once
// a signal arrived.
const shutdownGrace = 10 * time.Second

// run serves cfg.dir until ctx ends, then shuts down gracefully.
func run(ctx context.Context, cfg config) error {
	if fi, err := os.Stat(cfg.dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("-dir %s is not a directory", cfg.dir)
	}
	cert, err := selfsigned.New()
	if err != nil {
		return err
	}
	// The CA file lets clients verify the server (curl --cacert) instead
	// of switching verification off.
	caDir, err := os.MkdirTemp("", "ferry-server")
	if err != nil {
		return err
	}
	defer os.RemoveAll(caDir)
	caFile := filepath.Join(caDir, "ca.pem")
	if err := os.WriteFile(caFile, cert.CertPEM, 0o600); err != nil {
		return err
	}

	srv := server.Wrap(&http.Server{
		Addr:              cfg.addr,
		Handler:           http.FileServer(http.Dir(cfg.dir)),
		TLSConfig:         cert.ServerConfig(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(os.Stderr, "server: ", 0),
	})
	if err := srv.ListenTLS("", ""); err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	url := "https://" + srv.Addr().String() + "/"
	altSvc := waitAltSvc(srv)
	fmt.Fprintf(cfg.out, "serving %s\n", cfg.dir)
	fmt.Fprintf(cfg.out, "URL      %s\n", url)
	fmt.Fprintf(cfg.out, "Alt-Svc  %s\n", altSvc)
	fmt.Fprintf(cfg.out, "CA cert  %s (removed on exit)\n", caFile)
	fmt.Fprintf(cfg.out, "try:\n")
	fmt.Fprintf(cfg.out, "  curl --cacert %s --http1.1 -sI %s\n", caFile, url)
	fmt.Fprintf(cfg.out, "  curl --cacert %s --http2 -sI %s\n", caFile, url)
	fmt.Fprintf(cfg.out, "  curl --cacert %s --http3-only -sI %s   # a curl built with HTTP/3\n", caFile, url)
	fmt.Fprintf(cfg.out, "  go run ./examples/fetch -cacert %s -n 20 %s\n", caFile, url)
	if cfg.ready != nil {
		cfg.ready(url, caFile)
	}

	select {
	case err := <-served:
		return err // failed on its own
	case <-ctx.Done():
	}
	fmt.Fprintln(cfg.out, "shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		<-served
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// waitAltSvc returns the Alt-Svc value the server advertises; Serve sets
// it as it starts, moments after the goroutine running it was started.
func waitAltSvc(srv *server.Server) string {
	for i := 0; i < 200; i++ {
		if v := srv.AltSvc(); v != "" {
			return v
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "(none: HTTP/3 is not being served)"
}
