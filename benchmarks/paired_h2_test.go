package benchmarks

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/benchchild"
	"github.com/ferryhttp/ferry/transport"
	"golang.org/x/net/http2"
)

// BenchmarkPairedH2/{g1,g64} is BenchmarkPaired over HTTP/2 with TLS:
// ferry, net/http and x/net's own http2.Transport ("xnet") take turns of
// about 50 ms on one shared connection each, GETting a small response
// from a net/http server in a child process, every response checked.
// BenchmarkPairedH2/{get64k,post64k}/{g1,g64} do the same with a 64 KiB
// response body, and with a 64 KiB upload (the server checks its length);
// both are larger than HTTP/2's initial window, so flow control takes part.
// BenchmarkPairedH2/work20us/{g1,g64} is the small GET by a caller that
// spins for 20 µs after every response, as a service works with what it
// fetched: a client that is less often idle finds more of the server's
// responses waiting at each socket read.
//
// Reported per request and per client: <client>-cpu-ns/op, -user-ns/op
// (the client's own code and the Go runtime), -sys-ns/op (the kernel:
// mostly loopback TCP, which every client pays for each call it makes),
// -r-syscalls/op, -w-syscalls/op and -wall-ns/op (the wall time of its
// turns); and ferry/nethttp of the CPU, of the user time and of the wall
// time.

// h2ServerEnv makes the test binary a child serving HTTP/2 over TLS.
const h2ServerEnv = "FERRY_BENCHMARKS_H2_SERVER"

// h2BodyLen is the HTTP/2 server's response body length; h2LargeLen that
// of its large response (/bench64k) and of the uploads to /upload64k.
const (
	h2BodyLen  = 128
	h2LargeLen = 64 << 10
)

// h2Body is the small response's body of the HTTP/2 and HTTP/3 servers.
var h2Body = []byte(strings.Repeat("x", h2BodyLen))

// setH2Header sets the header fields of every HTTP/2 and HTTP/3 benchmark
// response.
func setH2Header(w http.ResponseWriter) {
	h := w.Header()
	h["Content-Type"] = []string{"text/plain"}
	h["X-Request-Id"] = []string{"0123456789"}
}

// serveSmall answers every request with the small response.
func serveSmall(w http.ResponseWriter, _ *http.Request) {
	setH2Header(w)
	w.Write(h2Body)
}

func runH2Server() {
	large := []byte(strings.Repeat("y", h2LargeLen))
	benchchild.ServeHTTP2(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setH2Header(w)
		switch r.URL.Path {
		case "/bench64k":
			w.Write(large)
		case "/upload64k":
			// The body's length as the server read it: the client checks it.
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
			}
			w.Write([]byte(strconv.FormatInt(n, 10)))
		default:
			w.Write(h2Body)
		}
	}))
}

var h2Child = &childServer{env: h2ServerEnv, serve: runH2Server}

func startH2Server(b *testing.B) string { return h2Child.start(b) }

// h2Get is one goroutine's GET of url on rt, checked: 200 over HTTP/2
// with exactly the server's bodyLen bytes.
func h2Get(b *testing.B, rt http.RoundTripper, url string, bodyLen int) func() {
	return protoGet(b, rt, url, 2, bodyLen)
}

// h2Upload is one goroutine's POST of h2LargeLen bytes to url on rt, made
// as http.NewRequest makes it (GetBody set), checked: 200 over HTTP/2 and
// the server read exactly that many bytes.
func h2Upload(b *testing.B, rt http.RoundTripper, url string) func() {
	payload := bytes.Repeat([]byte("u"), h2LargeLen)
	want := strconv.Itoa(h2LargeLen)
	buf := make([]byte, len(want)+1)
	return func() {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(payload))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		checkProtoResponse(b, resp, buf, len(want), want, 2)
	}
}

// checkProtoResponse reads resp's body into buf and fails b unless it is a 200
// over HTTP/major with exactly bodyLen bytes (and, when want is set, those
// bytes).
func checkProtoResponse(b *testing.B, resp *http.Response, buf []byte, bodyLen int, want string, major int) {
	if resp.ProtoMajor != major {
		resp.Body.Close()
		b.Fatalf("protocol %s, want HTTP/%d", resp.Proto, major)
	}
	n, err := io.ReadFull(resp.Body, buf)
	resp.Body.Close()
	if err != io.ErrUnexpectedEOF || n != bodyLen || resp.StatusCode != 200 || (want != "" && string(buf[:n]) != want) {
		b.Fatalf("status %d, body %d bytes %.20q, err %v", resp.StatusCode, n, buf[:n], err)
	}
}

// h2Clients are the three clients of the HTTP/2 rows, named "ferry",
// "nethttp" and "xnet"; the rows make a fresh set for each.
type h2Clients func() (ferry *transport.Transport, nethttp *http.Transport, xnet *http2.Transport)

// tlsH2Clients speak HTTP/2 over TLS to the loopback child.
func tlsH2Clients() (*transport.Transport, *http.Transport, *http2.Transport) {
	cfg := func() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } // loopback child, throwaway cert
	return &transport.Transport{TLSClientConfig: cfg(), ForceAttemptHTTP2: true},
		&http.Transport{TLSClientConfig: cfg(), ForceAttemptHTTP2: true},
		&http2.Transport{TLSClientConfig: cfg()}
}

func newPairedH2Clients(newRTs h2Clients, op func(http.RoundTripper) func(), goroutines int) []*pairedClient {
	ft, nt, xt := newRTs()
	rts := map[string]http.RoundTripper{"ferry": ft, "nethttp": nt, "xnet": xt}
	clients := []*pairedClient{
		{name: "ferry", done: ft.CloseIdleConnections},
		{name: "nethttp", done: nt.CloseIdleConnections},
		{name: "xnet", done: xt.CloseIdleConnections},
	}
	for _, c := range clients {
		for range goroutines {
			c.ops = append(c.ops, op(rts[c.name]))
		}
	}
	return clients
}

func BenchmarkPairedH2(b *testing.B) {
	base := "https://" + startH2Server(b)
	get := func(rt http.RoundTripper) func() { return h2Get(b, rt, base+"/bench", h2BodyLen) }
	runPairedH2(b, "", tlsH2Clients, get)
	get64k := func(rt http.RoundTripper) func() { return h2Get(b, rt, base+"/bench64k", h2LargeLen) }
	runPairedH2(b, "get64k/", tlsH2Clients, get64k)
	post64k := func(rt http.RoundTripper) func() { return h2Upload(b, rt, base+"/upload64k") }
	runPairedH2(b, "post64k/", tlsH2Clients, post64k)
	runPairedH2(b, "work20us/", tlsH2Clients, withCallerWork(get, 20*time.Microsecond))
}

// withCallerWork makes op's goroutines spin for d of wall time after each
// request, so that every client's caller does the same work with each
// response.
func withCallerWork(op func(http.RoundTripper) func(), d time.Duration) func(http.RoundTripper) func() {
	return func(rt http.RoundTripper) func() {
		do := op(rt)
		return func() {
			do()
			for start := time.Now(); time.Since(start) < d; {
			}
		}
	}
}

// runPairedH2 adds the rows prefix+{g1,g64}: the clients newRTs makes in
// turns, each goroutine doing what op makes for its client.
func runPairedH2(b *testing.B, prefix string, newRTs h2Clients, op func(http.RoundTripper) func()) {
	for _, g := range []int{1, 64} {
		b.Run(prefix+"g"+strconv.Itoa(g), func(b *testing.B) {
			clients := newPairedH2Clients(newRTs, op, g)
			defer func() {
				for _, c := range clients {
					c.done()
				}
			}()
			perOp := runTurns(b, clients, 4*g, g)
			user, wall := map[string]float64{}, map[string]float64{}
			for _, c := range clients {
				u, s := c.cost.UserSysPerOp(b.N)
				r, w := c.cost.ReadsWritesPerOp(b.N)
				user[c.name] = u
				wall[c.name] = float64(c.wall.Nanoseconds()) / float64(b.N)
				b.ReportMetric(u, c.name+"-user-ns/op")
				b.ReportMetric(s, c.name+"-sys-ns/op")
				b.ReportMetric(r, c.name+"-r-syscalls/op")
				b.ReportMetric(w, c.name+"-w-syscalls/op")
				b.ReportMetric(wall[c.name], c.name+"-wall-ns/op")
			}
			b.ReportMetric(perOp["ferry"]/perOp["nethttp"], "ferry/nethttp-cpu")
			b.ReportMetric(user["ferry"]/user["nethttp"], "ferry/nethttp-user")
			b.ReportMetric(wall["ferry"]/wall["nethttp"], "ferry/nethttp-wall")
		})
	}
}
