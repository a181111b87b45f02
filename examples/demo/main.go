// Command demo shows ferry end to end on loopback: a server that speaks
// HTTP/1.1 and HTTP/2 over TCP and HTTP/3 over UDP on one port (ferry's
// server wrapper around a plain http.Server, with a generated self-signed
// certificate), and two clients sending it the same requests:
//
//   - ferry's Transport: the first response carries the server's Alt-Svc
//     header, the QUIC handshake starts in the background, and the
//     following requests move to HTTP/3;
//   - net/http's Transport, for comparison: it ignores Alt-Svc and stays on
//     HTTP/2 (HTTP/1.1 when ferry's TCP side is HTTP/1.1 only).
//
// Each row shows the protocol and the latency of one request. The first
// request of each client pays for TCP and TLS; ferry's first HTTP/3 request
// finds the QUIC connection already made.
//
//	go run ./examples/demo -n 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/server"
	"github.com/ferryhttp/ferry/transport"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.requests, "n", 5, "requests per client (ferry: HTTP/3 requests after the switch)")
	flag.DurationVar(&cfg.gap, "gap", 20*time.Millisecond, "pause between requests, as between a program's calls")
	flag.Parse()
	cfg.out = os.Stdout
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type config struct {
	requests int
	gap      time.Duration
	out      io.Writer
}

// maxSwitchWait bounds how long ferry's requests may stay on TCP after the
// first one: on loopback the QUIC handshake takes a few milliseconds, more
// on a loaded machine. A time, not a count of requests: requests without
// a gap take tens of microseconds each.
const maxSwitchWait = 5 * time.Second

func run(cfg config) error {
	if cfg.requests < 1 {
		return errors.New("-n must be at least 1")
	}
	cert, err := selfsigned.New()
	if err != nil {
		return err
	}
	srv := server.Wrap(&http.Server{
		Addr: "127.0.0.1:0",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello over %s\n", r.Proto)
		}),
		TLSConfig:         cert.ServerConfig(),
		ReadHeaderTimeout: 5 * time.Second,
	})
	if err := srv.ListenTLS("", ""); err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-serveErr
	}()

	url := "https://" + srv.Addr().String() + "/"
	fmt.Fprintf(cfg.out, "server: %s  (TCP: HTTP/1.1, HTTP/2; UDP: HTTP/3, same port)\n\n", url)
	fmt.Fprintf(cfg.out, "%-9s %-4s %-9s %-7s %-11s %s\n", "client", "#", "proto", "status", "latency", "note")

	ferry := &transport.Transport{TLSClientConfig: cert.ClientConfig(), ForceAttemptHTTP2: true}
	defer ferry.CloseIdleConnections()
	h3Rows := 0
	var first time.Time
	for i := 1; h3Rows < cfg.requests; i++ {
		if h3Rows == 0 && i > 1 && time.Since(first) > maxSwitchWait {
			return fmt.Errorf("ferry: no switch to HTTP/3 within %v of the first request (%d requests)", maxSwitchWait, i-1)
		}
		resp, d, err := get(ferry, url)
		if err != nil {
			return fmt.Errorf("ferry request %d: %w", i, err)
		}
		note := ""
		switch {
		case i == 1 && resp.Header.Get("Alt-Svc") != "":
			note = "Alt-Svc: " + resp.Header.Get("Alt-Svc") + " -> QUIC dial starts in the background"
		case resp.ProtoMajor == 3 && h3Rows == 0:
			note = "switched to HTTP/3"
		}
		if resp.ProtoMajor == 3 {
			h3Rows++
		}
		row(cfg.out, "ferry", i, resp, d, note)
		if i == 1 {
			first = time.Now()
		}
		time.Sleep(cfg.gap)
	}

	std := &http.Transport{TLSClientConfig: cert.ClientConfig(), ForceAttemptHTTP2: true}
	defer std.CloseIdleConnections()
	for i := 1; i <= cfg.requests; i++ {
		resp, d, err := get(std, url)
		if err != nil {
			return fmt.Errorf("net/http request %d: %w", i, err)
		}
		note := ""
		if i == 1 {
			note = "net/http ignores Alt-Svc"
		}
		row(cfg.out, "net/http", i, resp, d, note)
		time.Sleep(cfg.gap)
	}
	fmt.Fprintln(cfg.out, "\nThe first request of each client pays for TCP and TLS; ferry's first HTTP/3")
	fmt.Fprintln(cfg.out, "request finds the QUIC connection that the Alt-Svc header started.")
	return nil
}

// get sends one GET, reads the whole body and returns the response with
// the time it took.
func get(rt http.RoundTripper, url string) (*http.Response, time.Duration, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return nil, 0, fmt.Errorf("reading body: %w", err)
	}
	if want := "hello over " + resp.Proto + "\n"; string(body) != want {
		return nil, 0, fmt.Errorf("body %q, want %q", body, want)
	}
	return resp, d, nil
}

func row(w io.Writer, client string, i int, resp *http.Response, d time.Duration, note string) {
	fmt.Fprintf(w, "%-9s %-4d %-9s %-7d %-11v %s\n", client, i, resp.Proto, resp.StatusCode, d.Round(time.Microsecond), note)
}
