// Command demo starts a local HTTPS server with a generated self-signed
// certificate and sends it a few requests, printing the protocol and latency
// of each one.
//
// This first version runs on the standard library only: ferry's transport and
// server wrapper replace its two halves as they land, and the final tour shows
// requests moving from HTTP/2 to HTTP/3 after the server's Alt-Svc header.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

func main() {
	requests := flag.Int("n", 5, "requests per client")
	flag.Parse()
	if err := run(*requests, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(requests int, out io.Writer) error {
	cert, err := selfsigned.New()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello over %s\n", r.Proto)
		}),
		TLSConfig:         cert.ServerConfig(),
		ReadHeaderTimeout: 5 * time.Second,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-serveErr
	}()

	url := "https://" + ln.Addr().String() + "/"
	fmt.Fprintf(out, "server: %s (HTTP/1.1 and HTTP/2 over TLS)\n\n", url)
	fmt.Fprintf(out, "%-22s %-4s %-9s %-8s %s\n", "client", "#", "proto", "status", "latency")

	clients := []struct {
		name string
		rt   *http.Transport
	}{
		{"net/http, HTTP/1.1", &http.Transport{TLSClientConfig: cert.ClientConfig()}},
		{"net/http, HTTP/2", &http.Transport{TLSClientConfig: cert.ClientConfig(), ForceAttemptHTTP2: true}},
	}
	for _, c := range clients {
		client := &http.Client{Transport: c.rt, Timeout: 10 * time.Second}
		for i := 1; i <= requests; i++ {
			start := time.Now()
			resp, err := client.Get(url)
			if err != nil {
				return fmt.Errorf("%s request %d: %w", c.name, i, err)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				return fmt.Errorf("%s request %d: reading body: %w", c.name, i, err)
			}
			fmt.Fprintf(out, "%-22s %-4d %-9s %-8d %v\n", c.name, i, resp.Proto, resp.StatusCode, time.Since(start).Round(time.Microsecond))
		}
		c.rt.CloseIdleConnections()
	}
	fmt.Fprintln(out, "\nThe first request of each client pays for TCP and TLS; the rest reuse the connection.")
	return nil
}
