package benchmarks

import (
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/benchchild"
	"github.com/ferryhttp/ferry/transport"
	"golang.org/x/net/http2"
)

// BenchmarkPairedH2/{g1,g64} is BenchmarkPaired over HTTP/2 with TLS:
// ferry, net/http and x/net's own http2.Transport ("xnet") take turns of
// about 50 ms on one shared connection each, GETting a small response
// from a net/http server in a child process, every response checked.
//
// Reported per request and per client: <client>-cpu-ns/op, -user-ns/op
// (the client's own code and the Go runtime), -sys-ns/op (the kernel:
// mostly loopback TCP, which every client pays for each call it makes),
// -r-syscalls/op and -w-syscalls/op; and ferry/nethttp of the CPU and of
// the user time.

// h2ServerEnv makes the test binary a child serving HTTP/2 over TLS.
const h2ServerEnv = "FERRY_BENCHMARKS_H2_SERVER"

// h2BodyLen is the HTTP/2 server's response body length.
const h2BodyLen = 128

func runH2Server() {
	body := []byte(strings.Repeat("x", h2BodyLen))
	benchchild.ServeHTTP2(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{"text/plain"}
		h["X-Request-Id"] = []string{"0123456789"}
		w.Write(body)
	}))
}

var h2Server struct {
	once sync.Once
	addr string
	stop func()
	err  error
}

func startH2Server(b *testing.B) string {
	h2Server.once.Do(func() {
		h2Server.addr, h2Server.stop, h2Server.err = benchchild.Start(h2ServerEnv)
	})
	if h2Server.err != nil {
		b.Fatal(h2Server.err)
	}
	return h2Server.addr
}

// h2Get is one goroutine's GET of url on rt, checked: 200 over HTTP/2
// with exactly the server's body.
func h2Get(b *testing.B, rt http.RoundTripper, url string) func() {
	req, _ := http.NewRequest("GET", url, nil)
	buf := make([]byte, h2BodyLen+1)
	return func() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.ProtoMajor != 2 {
			b.Fatalf("protocol %s, want HTTP/2", resp.Proto)
		}
		n, err := io.ReadFull(resp.Body, buf)
		resp.Body.Close()
		if err != io.ErrUnexpectedEOF || n != h2BodyLen || resp.StatusCode != 200 {
			b.Fatalf("status %d, body %d bytes, err %v", resp.StatusCode, n, err)
		}
	}
}

func newPairedH2Clients(b *testing.B, url string, goroutines int) []*pairedClient {
	cfg := func() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } // loopback child, throwaway cert
	ft := &transport.Transport{TLSClientConfig: cfg(), ForceAttemptHTTP2: true}
	nt := &http.Transport{TLSClientConfig: cfg(), ForceAttemptHTTP2: true}
	xt := &http2.Transport{TLSClientConfig: cfg()}
	rts := map[string]http.RoundTripper{"ferry": ft, "nethttp": nt, "xnet": xt}
	clients := []*pairedClient{
		{name: "ferry", done: ft.CloseIdleConnections},
		{name: "nethttp", done: nt.CloseIdleConnections},
		{name: "xnet", done: xt.CloseIdleConnections},
	}
	for _, c := range clients {
		for range goroutines {
			c.ops = append(c.ops, h2Get(b, rts[c.name], url))
		}
	}
	return clients
}

func BenchmarkPairedH2(b *testing.B) {
	url := "https://" + startH2Server(b) + "/bench"
	for _, g := range []int{1, 64} {
		b.Run("g"+strconv.Itoa(g), func(b *testing.B) {
			clients := newPairedH2Clients(b, url, g)
			defer func() {
				for _, c := range clients {
					c.done()
				}
			}()
			perOp := runTurns(b, clients, 4*g, g)
			user := map[string]float64{}
			for _, c := range clients {
				u, s := c.cost.UserSysPerOp(b.N)
				r, w := c.cost.ReadsWritesPerOp(b.N)
				user[c.name] = u
				b.ReportMetric(u, c.name+"-user-ns/op")
				b.ReportMetric(s, c.name+"-sys-ns/op")
				b.ReportMetric(r, c.name+"-r-syscalls/op")
				b.ReportMetric(w, c.name+"-w-syscalls/op")
			}
			b.ReportMetric(perOp["ferry"]/perOp["nethttp"], "ferry/nethttp-cpu")
			b.ReportMetric(user["ferry"]/user["nethttp"], "ferry/nethttp-user")
		})
	}
}
