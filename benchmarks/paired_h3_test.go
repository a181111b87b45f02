package benchmarks

import (
	"crypto/tls"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/benchchild"
	"github.com/ferryhttp/ferry/transport"
)

// BenchmarkPairedH3/{g1,g64} measures what HTTP/3 costs a client against
// HTTP/2 to the same server: ferry over HTTP/3 ("ferry_h3"), ferry with
// DisableHTTP3 ("ferry_h2") and net/http ("nethttp", HTTP/2) take turns
// of about 50 ms, GETting a small response from ferry's server.Wrap in a
// child process (TLS on TCP and HTTP/3 on UDP, one port), every response
// checked for its protocol and its body.
//
// Reported per request and per client: <client>-cpu-ns/op, -user-ns/op,
// -sys-ns/op and -wall-ns/op; and ferry_h3/ferry_h2 and ferry_h3/nethttp
// of the CPU. The g1 row also reports <client>-allocs/op, the allocations
// of this process (the client alone: the server is the child) over 2,000
// more requests per client after the turns. Read and write system calls
// are not reported: HTTP/3's sendmsg and recvmsg are not counted where the
// HTTP/2 clients' read and write are (/proc/self/io), so the figures would
// not compare.

// h3ServerEnv makes the test binary a child serving through server.Wrap.
const h3ServerEnv = "FERRY_BENCHMARKS_H3_SERVER"

func runH3Server() { benchchild.ServeHTTP3(http.HandlerFunc(serveSmall)) }

var h3Child = &childServer{env: h3ServerEnv, serve: runH3Server}

func startH3Server(b *testing.B) string { return h3Child.start(b) }

// protoGet is one goroutine's GET of url on rt, checked: 200 over
// HTTP/major with exactly bodyLen bytes.
func protoGet(b *testing.B, rt http.RoundTripper, url string, major, bodyLen int) func() {
	req, _ := http.NewRequest("GET", url, nil)
	buf := make([]byte, bodyLen+1)
	return func() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		checkProtoResponse(b, resp, buf, bodyLen, "", major)
	}
}

// awaitHTTP3 sends GETs on rt until one is answered over HTTP/3 (the
// first learns the Alt-Svc, a later one rides the QUIC connection it
// started), or fails b after 5 s.
func awaitHTTP3(b *testing.B, rt http.RoundTripper, url string) {
	req, _ := http.NewRequest("GET", url, nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor == 3 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("still %s after 5 s: the server's Alt-Svc never took", resp.Proto)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allocsPerOp runs op n times and returns the process's allocations per
// call (heap objects, as runtime.MemStats counts them).
func allocsPerOp(op func(), n int) float64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		op()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}

func BenchmarkPairedH3(b *testing.B) {
	url := "https://" + startH3Server(b) + "/bench"
	for _, g := range []int{1, 64} {
		b.Run("g"+strconv.Itoa(g), func(b *testing.B) {
			cfg := func() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } // loopback child, throwaway cert
			h3 := &transport.Transport{TLSClientConfig: cfg()}
			h2 := &transport.Transport{TLSClientConfig: cfg(), ForceAttemptHTTP2: true, DisableHTTP3: true}
			nt := &http.Transport{TLSClientConfig: cfg(), ForceAttemptHTTP2: true}
			awaitHTTP3(b, h3, url)
			clients := []*pairedClient{
				{name: "ferry_h3", done: h3.CloseIdleConnections},
				{name: "ferry_h2", done: h2.CloseIdleConnections},
				{name: "nethttp", done: nt.CloseIdleConnections},
			}
			defer func() {
				for _, c := range clients {
					c.done()
				}
			}()
			ops := map[string]func() func(){
				"ferry_h3": func() func() { return protoGet(b, h3, url, 3, h2BodyLen) },
				"ferry_h2": func() func() { return protoGet(b, h2, url, 2, h2BodyLen) },
				"nethttp":  func() func() { return protoGet(b, nt, url, 2, h2BodyLen) },
			}
			for _, c := range clients {
				for range g {
					c.ops = append(c.ops, ops[c.name]())
				}
			}
			perOp := runTurns(b, clients, 4*g, g)
			for _, c := range clients {
				u, s := c.cost.UserSysPerOp(b.N)
				b.ReportMetric(u, c.name+"-user-ns/op")
				b.ReportMetric(s, c.name+"-sys-ns/op")
				b.ReportMetric(float64(c.wall.Nanoseconds())/float64(b.N), c.name+"-wall-ns/op")
			}
			if g == 1 {
				b.StopTimer()
				for _, c := range clients {
					b.ReportMetric(allocsPerOp(c.ops[0], 2000), c.name+"-allocs/op")
				}
			}
			b.ReportMetric(perOp["ferry_h3"]/perOp["ferry_h2"], "h3/h2-cpu")
			b.ReportMetric(perOp["ferry_h3"]/perOp["nethttp"], "h3/nethttp-cpu")
		})
	}
}
