package transport

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/benchchild"
	"github.com/ferryhttp/ferry/internal/selfsigned"
	"golang.org/x/net/http2"
)

// The HTTP/2 rows of BenchmarkRoundTrip: one GET on a shared TLS HTTP/2
// connection to a net/http server in a child process (this test binary
// re-executed with benchH2ServerEnv set), serial and from 64 goroutines,
// for ferry and net/http in the same run, and for x/net's own
// http2.Transport ("xnet"): the HTTP/2 code ferry uses, without ferry, so
// the run shows what ferry adds and what x/net costs against net/http's
// bundled copy. The response has the h1 bench's shape: benchBodyLen bytes
// and a few header fields.

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
		benchchild.Fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		benchchild.Fail(err)
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
	benchchild.Announce(ln)
	srv.ServeTLS(ln, "", "")
	os.Exit(0)
}

var benchH2 struct {
	once sync.Once
	url  string
	err  error
}

func startBenchH2Server(b *testing.B) string {
	benchH2.once.Do(func() {
		addr, _, err := benchchild.Start(benchH2ServerEnv)
		benchH2.url, benchH2.err = "https://"+addr+"/bench", err
	})
	if benchH2.err != nil {
		b.Fatal(benchH2.err)
	}
	return benchH2.url
}

func benchH2Client(impl string) http.RoundTripper {
	cfg := &tls.Config{InsecureSkipVerify: true} // loopback child with a throwaway cert
	switch impl {
	case "ferry":
		return &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	case "xnet":
		return &http2.Transport{TLSClientConfig: cfg}
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
