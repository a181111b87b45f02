package transport

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// The HTTP/2 rows of BenchmarkRoundTrip: one GET on a shared TLS HTTP/2
// connection to a net/http server in a child process (this test binary
// re-executed with benchH2ServerEnv set), serial and from 64 goroutines,
// for ferry and net/http in the same run. The response has the h1 bench's
// shape: benchBodyLen bytes and a few header fields.

const benchH2ServerEnv = "FERRY_BENCH_H2_SERVER"

func init() {
	// The child never returns to the test framework: it serves until its
	// parent closes stdin.
	if os.Getenv(benchH2ServerEnv) != "" {
		runBenchH2Server()
		os.Exit(0)
	}
}

func runBenchH2Server() {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	body := []byte(strings.Repeat("x", benchBodyLen))
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["Content-Type"] = []string{"text/plain"}
			h["X-Bench-Header-2"] = []string{"value-2"}
			h["X-Bench-Header-3"] = []string{"value-3"}
			w.Write(body)
		}),
		TLSConfig: cert.ServerConfig(),
		ErrorLog:  nilLogger(),
	}
	srv.TLSConfig.NextProtos = []string{"h2"}
	fmt.Println(ln.Addr().String())
	go func() { // exit when the parent closes our stdin
		b := make([]byte, 1)
		os.Stdin.Read(b)
		os.Exit(0)
	}()
	srv.ServeTLS(ln, "", "")
	os.Exit(0)
}

var benchH2 struct {
	once sync.Once
	url  string
	err  error
	cmd  *exec.Cmd
}

func startBenchH2Server(b *testing.B) string {
	benchH2.once.Do(func() {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), benchH2ServerEnv+"=1")
		if _, err := cmd.StdinPipe(); err != nil { // kept open: the child exits on EOF
			benchH2.err = err
			return
		}
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			benchH2.err = err
			return
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || strings.HasPrefix(line, "ERR") {
			benchH2.err = fmt.Errorf("h2 bench server: %q %v", line, err)
			return
		}
		benchH2.url = "https://" + strings.TrimSpace(line) + "/bench"
		benchH2.cmd = cmd
	})
	if benchH2.err != nil {
		b.Fatal(benchH2.err)
	}
	return benchH2.url
}

func benchH2Client(impl string) http.RoundTripper {
	cfg := &tls.Config{InsecureSkipVerify: true} // loopback child with a throwaway cert
	if impl == "ferry" {
		return &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	}
	return &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
}

// benchH2Get is benchGet plus a check that the request went over HTTP/2.
func benchH2Get(b *testing.B, rt http.RoundTripper, req *http.Request, buf []byte) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		b.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	n, rerr := readFull(resp, buf)
	if rerr != nil || n != benchBodyLen || resp.StatusCode != 200 {
		b.Fatalf("status %d, body %d bytes, err %v", resp.StatusCode, n, rerr)
	}
}

// readFull reads the whole body into buf and closes it.
func readFull(resp *http.Response, buf []byte) (int, error) {
	defer resp.Body.Close()
	n := 0
	for {
		m, err := resp.Body.Read(buf[n:])
		n += m
		if err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		if n == len(buf) {
			return n, fmt.Errorf("body longer than %d bytes", len(buf))
		}
	}
}

// benchRoundTripH2 adds impl's h2/serial and h2/parallel rows to
// BenchmarkRoundTrip.
func benchRoundTripH2(b *testing.B, impl string) {
	url := startBenchH2Server(b)
	benchServedGets(b, impl+"/h2", func() http.RoundTripper { return benchH2Client(impl) }, url, benchH2Get)
}
