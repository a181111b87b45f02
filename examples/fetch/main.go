// Command fetch is a small curl-like client built on ferry's Transport. It
// fetches a URL and prints the protocol that carried the response, the
// time each phase took (DNS, connect, TLS, first byte, total, from
// httptrace) and the Alt-Svc alternatives the Transport learned from it.
// With -n N it repeats the request on the same Transport, showing a live
// progress line, then a summary: protocol mix and latency percentiles. An
// https server that advertises HTTP/3 is reached over HTTP/3 once the
// first response has told ferry about it.
//
//	go run ./examples/fetch -n 20 -cacert ca.pem https://127.0.0.1:8443/
//	go run ./examples/fetch -X POST -d 'hello' -H 'Content-Type: text/plain' http://127.0.0.1:8080/echo
package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/ferryhttp/ferry/altsvc"
	"github.com/ferryhttp/ferry/transport"
)

// headerFlags collects repeated -H flags.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	var cfg config
	var headers headerFlags
	flag.IntVar(&cfg.n, "n", 1, "number of requests, sent one after another on one Transport")
	flag.BoolVar(&cfg.insecure, "k", false, "do not verify the server's certificate")
	flag.StringVar(&cfg.caFile, "cacert", "", "PEM file of CA certificates to verify the server with")
	flag.StringVar(&cfg.method, "X", "", "request method (default GET, or POST with -d)")
	flag.StringVar(&cfg.data, "d", "", "request body")
	flag.Var(&headers, "H", `request header "Name: value" (repeatable)`)
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "limit for each request, body included")
	flag.DurationVar(&cfg.interval, "interval", 0, "pause between requests with -n")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: fetch [flags] URL")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	cfg.url = flag.Arg(0)
	cfg.headers = headers
	cfg.out = os.Stdout
	cfg.tty = isTerminal(os.Stdout)
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fetch:", err)
		os.Exit(1)
	}
}

type config struct {
	url      string
	n        int
	insecure bool
	caFile   string
	method   string
	data     string
	headers  []string
	timeout  time.Duration
	interval time.Duration
	out      io.Writer
	tty      bool // rewrite one progress line with \r instead of printing lines
}

// isTerminal reports whether f is a character device (a terminal), without
// a dependency: enough to choose between a live line and plain lines.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func run(cfg config) error {
	if cfg.n < 1 {
		return errors.New("-n must be at least 1")
	}
	u, err := url.Parse(cfg.url)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("unsupported URL scheme %q (want http or https)", u.Scheme)
	}
	header, err := parseHeaders(cfg.headers)
	if err != nil {
		return err
	}
	method := cfg.method
	if method == "" {
		method = "GET"
		if cfg.data != "" {
			method = "POST"
		}
	}
	tlsCfg, err := clientTLS(cfg.insecure, cfg.caFile)
	if err != nil {
		return err
	}
	tr := transport.New()
	tr.TLSClientConfig = tlsCfg // New sets ForceAttemptHTTP2: HTTP/2 stays on
	tr.AltSvc = altsvc.New(altsvc.Options{})
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: cfg.timeout}

	var results []result
	for i := 0; i < cfg.n; i++ {
		if i > 0 && cfg.interval > 0 {
			time.Sleep(cfg.interval)
		}
		r := fetchOnce(client, method, u.String(), header, cfg.data)
		results = append(results, r)
		switch {
		case cfg.n == 1:
			printDetail(cfg.out, method, u.String(), r)
		case cfg.tty:
			fmt.Fprintf(cfg.out, "\r%s\033[K", progressLine(i+1, cfg.n, r))
		default:
			fmt.Fprintln(cfg.out, progressLine(i+1, cfg.n, r))
		}
	}
	if cfg.n > 1 {
		if cfg.tty {
			fmt.Fprintln(cfg.out)
		}
		printDetail(cfg.out, method, u.String(), results[0])
		printSummary(cfg.out, results)
	}
	printAltSvc(cfg.out, tr.AltSvc, u, results[len(results)-1])
	st := tr.Stats()
	fmt.Fprintf(cfg.out, "transport: %d TCP dials, %d QUIC connections; responses h1/h2/h3 %d/%d/%d\n",
		st.Conns.Dialled, st.AltSvc.Upgrades, st.Requests.H1, st.Requests.H2, st.Requests.H3)
	for _, r := range results {
		if r.err != nil {
			return fmt.Errorf("%d of %d requests failed; first: %w", countFailed(results), len(results), firstErr(results))
		}
	}
	return nil
}

// parseHeaders turns "Name: value" strings into a header.
func parseHeaders(lines []string) (http.Header, error) {
	h := http.Header{}
	for _, l := range lines {
		name, value, ok := strings.Cut(l, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf(`bad -H %q: want "Name: value"`, l)
		}
		h.Add(name, strings.TrimSpace(value))
	}
	return h, nil
}

// clientTLS is the TLS configuration the flags ask for; nil means the
// system's roots.
func clientTLS(insecure bool, caFile string) (*tls.Config, error) {
	if !insecure && caFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: insecure}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-cacert %s: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func countFailed(rs []result) int {
	n := 0
	for _, r := range rs {
		if r.err != nil {
			n++
		}
	}
	return n
}

func firstErr(rs []result) error {
	for _, r := range rs {
		if r.err != nil {
			return r.err
		}
	}
	return nil
}
