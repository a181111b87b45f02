package benchmarks

import (
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/ferryhttp/ferry/internal/proccost"
	"github.com/ferryhttp/ferry/transport"
	"github.com/valyala/fasthttp"
)

// BenchmarkClient/{ferry,nethttp,fasthttp}/{g1,g64}: one GET per op on a
// reused connection, every response's status and body length checked.
// Metrics: cpu-ns/op, ctxsw/op (getrusage), rw-syscalls/op (/proc/self/io).

func report(b *testing.B, before proccost.Cost) {
	cpuNs, ctxSw, rw := proccost.Since(before).PerOp(b.N)
	b.ReportMetric(cpuNs, "cpu-ns/op")
	b.ReportMetric(ctxSw, "ctxsw/op")
	b.ReportMetric(rw, "rw-syscalls/op")
}

type doer func(b *testing.B) func() // per goroutine: returns the op

func roundTripper(rt http.RoundTripper, url string) doer {
	return func(b *testing.B) func() {
		req, _ := http.NewRequest("GET", url, nil)
		buf := make([]byte, 512)
		return func() {
			resp, err := rt.RoundTrip(req)
			checkResponse(b, resp, err, buf)
		}
	}
}

// checkResponse fails b unless resp is a 200 with exactly the benchmark
// server's body; it reads the body into buf and closes it.
func checkResponse(b *testing.B, resp *http.Response, err error, buf []byte) {
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.ReadFull(resp.Body, buf[:bodyLen])
	if err != nil || n != bodyLen || resp.StatusCode != 200 {
		b.Fatalf("status %d body %d err %v", resp.StatusCode, n, err)
	}
	if _, err := resp.Body.Read(buf); err != io.EOF {
		b.Fatalf("body too long: %v", err)
	}
	resp.Body.Close()
}

func fastClient(c *fasthttp.HostClient, url string) doer {
	return func(b *testing.B) func() {
		op, _ := fastOp(b, c, url)
		return op
	}
}

// fastOp returns one goroutine's fasthttp GET, which checks the status and
// body length, and the response object it fills.
func fastOp(b *testing.B, c *fasthttp.HostClient, url string) (func(), *fasthttp.Response) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.SetRequestURI(url)
	return func() {
		if err := c.Do(req, resp); err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode() != 200 || len(resp.Body()) != bodyLen {
			b.Fatalf("status %d body %d", resp.StatusCode(), len(resp.Body()))
		}
	}, resp
}

func BenchmarkClient(b *testing.B) {
	addr := startServer(b)
	url := "http://" + addr + "/bench"
	clients := []struct {
		name string
		make func() (doer, func())
	}{
		{"ferry", func() (doer, func()) {
			t := &transport.Transport{MaxIdleConnsPerHost: 128}
			return roundTripper(t, url), t.CloseIdleConnections
		}},
		{"nethttp", func() (doer, func()) {
			t := &http.Transport{MaxIdleConnsPerHost: 128}
			return roundTripper(t, url), t.CloseIdleConnections
		}},
		{"fasthttp", func() (doer, func()) {
			c := &fasthttp.HostClient{Addr: addr, MaxConns: 128}
			return fastClient(c, url), c.CloseIdleConnections
		}},
		{"floor", func() (doer, func()) {
			c := &fasthttp.HostClient{Addr: addr, MaxConns: 128}
			return roundTripFloor(c, url), c.CloseIdleConnections
		}},
	}
	for _, c := range clients {
		b.Run(c.name+"/g1", func(b *testing.B) {
			d, done := c.make()
			defer done()
			op := d(b)
			op()
			b.ReportAllocs()
			b.ResetTimer()
			before := proccost.Read()
			for i := 0; i < b.N; i++ {
				op()
			}
			b.StopTimer()
			report(b, before)
		})
		b.Run(c.name+"/g64", func(b *testing.B) {
			d, done := c.make()
			defer done()
			// 64 goroutines whatever GOMAXPROCS is (RunParallel starts
			// parallelism x GOMAXPROCS).
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.ResetTimer()
			before := proccost.Read()
			b.RunParallel(func(pb *testing.PB) {
				op := d(b)
				for pb.Next() {
					op()
				}
			})
			b.StopTimer()
			report(b, before)
		})
	}
}
