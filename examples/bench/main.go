// Command bench compares ferry's Transport with net/http's on loopback,
// side by side in one run, and prints the table the README shows:
// wall time, client CPU time, allocations and read/write syscalls per
// request, for HTTP/1.1 and HTTP/2 (over TLS), on one goroutine and on
// several. It also writes the table as an SVG bar chart (-svg).
//
// How it keeps the comparison honest: the server runs in a child process
// (this program re-executed), so the CPU time, allocations and syscalls
// counted are the client's alone; both clients run in the same process in
// alternating order (A B, B A, ...) for several rounds and each figure is
// the median of its rounds; every response's status, protocol and body
// length are checked, and a failed request stops the run. Absolute figures
// depend on the machine and its load; the ratios are what carries over.
//
//	go run ./examples/bench                 # about 10-20 s
//	go run ./examples/bench -n 20000 -rounds 9 -svg bench.svg
package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/transport"
)

func main() {
	if isChild() {
		if err := serveChild(); err != nil {
			fmt.Fprintln(os.Stderr, "bench server:", err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	flag.IntVar(&cfg.requests, "n", 4000, "requests per client per case per round")
	flag.IntVar(&cfg.rounds, "rounds", 5, "rounds (each client once per round, order alternating)")
	flag.IntVar(&cfg.parallel, "parallel", 16, "goroutines for the concurrent cases")
	flag.StringVar(&cfg.svg, "svg", "bench.svg", `SVG chart file to write ("" for none)`)
	flag.Parse()
	cfg.out = os.Stdout
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type config struct {
	requests, rounds, parallel int
	svg                        string
	out                        io.Writer
}

// benchCase is one row pair of the table.
type benchCase struct {
	name       string
	url        string
	goroutines int
	proto      int // the HTTP major version every response must have
}

// clients are the two sides compared, in table order.
var clients = []string{"ferry", "net/http"}

// result holds the medians of one case: [client]sample.
type result struct {
	c      benchCase
	median [2]sample
}

func run(cfg config) error {
	if cfg.requests < 1 || cfg.rounds < 1 || cfg.parallel < 1 {
		return errors.New("-n, -rounds and -parallel must be positive")
	}
	cert, err := selfsigned.New()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ferry-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	certFile, keyFile, err := cert.WriteFiles(dir)
	if err != nil {
		return err
	}
	plainAddr, tlsAddr, stop, err := startChild(certFile, keyFile)
	if err != nil {
		return err
	}
	defer stop()

	par := fmt.Sprintf("x%d", cfg.parallel)
	cases := []benchCase{
		{"h1 serial", "http://" + plainAddr + "/", 1, 1},
		{"h1 " + par, "http://" + plainAddr + "/", cfg.parallel, 1},
		{"h2 serial", "https://" + tlsAddr + "/", 1, 2},
		{"h2 " + par, "https://" + tlsAddr + "/", cfg.parallel, 2},
	}
	fmt.Fprintf(cfg.out, "ferry vs net/http on loopback, server in a child process: medians of %d rounds x %d requests, order alternating\n\n",
		cfg.rounds, cfg.requests)
	var results []result
	for _, c := range cases {
		r, err := runCase(c, cfg, cert.ClientConfig())
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		results = append(results, r)
	}
	printTable(cfg.out, results)
	if cfg.svg != "" {
		if err := os.WriteFile(cfg.svg, []byte(chartSVG(results, cfg)), 0o644); err != nil {
			return err
		}
		abs, _ := filepath.Abs(cfg.svg)
		fmt.Fprintf(cfg.out, "\nchart written to %s\n", abs)
	}
	return nil
}

// newClient returns a fresh RoundTripper of the named kind, with room for
// the concurrent cases' connections in the idle pool.
func newClient(name string, tlsCfg *tls.Config, idle int) (http.RoundTripper, func()) {
	if name == "ferry" {
		t := transport.New()
		t.TLSClientConfig = tlsCfg.Clone()
		t.MaxIdleConnsPerHost = idle
		return t, t.CloseIdleConnections
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsCfg.Clone()
	t.MaxIdleConnsPerHost = idle
	return t, t.CloseIdleConnections
}

// runCase measures both clients on c for cfg.rounds rounds.
func runCase(c benchCase, cfg config, tlsCfg *tls.Config) (result, error) {
	var rts [2]http.RoundTripper
	for i, name := range clients {
		rt, closeIdle := newClient(name, tlsCfg, c.goroutines)
		defer closeIdle()
		// Warm up: connections dialled, TLS done, pools filled.
		if _, err := measure(rt, c.url, 20*c.goroutines, c.goroutines, c.proto); err != nil {
			return result{}, fmt.Errorf("%s warm-up: %w", name, err)
		}
		rts[i] = rt
	}
	samples := [2][]sample{}
	for round := 0; round < cfg.rounds; round++ {
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			s, err := measure(rts[i], c.url, cfg.requests, c.goroutines, c.proto)
			if err != nil {
				return result{}, fmt.Errorf("%s: %w", clients[i], err)
			}
			samples[i] = append(samples[i], s)
		}
	}
	r := result{c: c}
	for i := range clients {
		r.median[i] = medianSample(samples[i])
	}
	return r, nil
}

// medianSample takes the median of each figure on its own.
func medianSample(ss []sample) sample {
	pick := func(f func(sample) float64) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return sample{
		ns:         pick(func(s sample) float64 { return s.ns }),
		cpuNs:      pick(func(s sample) float64 { return s.cpuNs }),
		allocs:     pick(func(s sample) float64 { return s.allocs }),
		rwSyscalls: pick(func(s sample) float64 { return s.rwSyscalls }),
	}
}

// printTable prints both clients per case and ferry's ratio to net/http.
func printTable(w io.Writer, rs []result) {
	fmt.Fprintf(w, "%-10s %-9s %10s %10s %10s %15s\n", "case", "client", "ns/op", "cpu-ns/op", "allocs/op", "rw-syscalls/op")
	for _, r := range rs {
		for i, name := range clients {
			s := r.median[i]
			label := r.c.name
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(w, "%-10s %-9s %10.0f %10.0f %10.1f %15.2f\n", label, name, s.ns, s.cpuNs, s.allocs, s.rwSyscalls)
		}
		f, n := r.median[0], r.median[1]
		fmt.Fprintf(w, "%-10s %-9s %10s %10s %10s %15s\n", "", "ratio", ratio(f.ns, n.ns), ratio(f.cpuNs, n.cpuNs),
			ratio(f.allocs, n.allocs), ratio(f.rwSyscalls, n.rwSyscalls))
	}
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// startChild re-executes this program as the server and returns its
// addresses and a function that stops it.
func startChild(certFile, keyFile string) (plain, secure string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", "", nil, err
	}
	cmd := exec.Command(self) // isChild, checked first, makes it the server
	cmd.Env = append(os.Environ(), childEnv+"=1", childCertEnv+"="+certFile, childKeyEnv+"="+keyFile)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", "", nil, err
	}
	stop = func() {
		stdin.Close() // the child exits at EOF on stdin
		cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", "", nil, fmt.Errorf("bench server did not start: %w", err)
	}
	plain, secure, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		stop()
		return "", "", nil, fmt.Errorf("bench server said %q", line)
	}
	return plain, secure, stop, nil
}
