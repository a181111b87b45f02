package transport

import (
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/benchchild"
	"github.com/ferryhttp/ferry/internal/proccost"
)

// BenchmarkRoundTrip measures one HTTP/1.1 GET on a reused keep-alive
// connection against a server in a child process, for ferry and net/http
// in the same run. Besides ns/op, allocs/op and B/op it reports the client
// process's own costs per request: rw-syscalls/op (syscr+syscw from
// /proc/self/io), cpu-ns/op (with its user-ns/op and sys-ns/op)
// and ctxsw/op (getrusage). Every response's
// status and body length are checked.

var benchServer struct {
	once sync.Once
	addr string
	err  error
}

// startBenchServer starts the server child (once).
func startBenchServer(b *testing.B) string {
	benchServer.once.Do(func() {
		benchServer.addr, _, benchServer.err = benchchild.Start(benchServerEnv)
	})
	if benchServer.err != nil {
		b.Fatal(benchServer.err)
	}
	return "http://" + benchServer.addr + "/bench"
}

// costMark is a reading of the process's costs before a benchmark loop.
type costMark struct {
	proc    proccost.Cost
	mallocs uint64
}

// markCost takes the reading reportCost compares with.
func markCost() costMark {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return costMark{proc: proccost.Read(), mallocs: ms.Mallocs}
}

// reportCost reports the process's CPU, context switches and read/write
// syscalls (together, then reads and writes apart) per op since before, and mallocs/op: allocations per op with
// two decimals (allocs/op is truncated to an integer, which can hide a
// difference of one allocation between two rows).
func reportCost(b *testing.B, before costMark) {
	spent := proccost.Since(before.proc)
	cpuNs, ctxSw, rw := spent.PerOp(b.N)
	userNs, sysNs := spent.UserSysPerOp(b.N)
	reads, writes := spent.ReadsWritesPerOp(b.N)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(rw, "rw-syscalls/op")
	b.ReportMetric(reads, "r-syscalls/op")
	b.ReportMetric(writes, "w-syscalls/op")
	b.ReportMetric(cpuNs, "cpu-ns/op")
	b.ReportMetric(userNs, "user-ns/op")
	b.ReportMetric(sysNs, "sys-ns/op")
	b.ReportMetric(ctxSw, "ctxsw/op")
	b.ReportMetric(float64(ms.Mallocs-before.mallocs)/float64(b.N), "mallocs/op")
}

// benchGet does one request and checks status and body length.
func benchGet(b *testing.B, rt http.RoundTripper, req *http.Request, buf []byte) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.ReadFull(resp.Body, buf[:benchBodyLen])
	if err != nil || n != benchBodyLen || resp.StatusCode != 200 {
		b.Fatalf("status %d, body %d bytes, err %v", resp.StatusCode, n, err)
	}
	if _, err := resp.Body.Read(buf); err != io.EOF {
		b.Fatalf("body longer than expected: %v", err)
	}
	resp.Body.Close()
}

func BenchmarkRoundTrip(b *testing.B) {
	url := startBenchServer(b)
	impls := []struct {
		name string
		rt   func() http.RoundTripper
	}{
		{"ferry", func() http.RoundTripper { return &Transport{MaxIdleConnsPerHost: 128} }},
		{"nethttp", func() http.RoundTripper { return &http.Transport{MaxIdleConnsPerHost: 128} }},
	}
	for _, impl := range impls {
		benchServedGets(b, impl.name+"/h1", impl.rt, url, benchGet)
		benchRoundTripH2(b, impl.name)
	}
	benchRoundTripH2(b, "xnet")
}

// benchServedGets adds the serial and parallel rows of one client and
// protocol: after one warming request, b.N GETs on one goroutine, or spread
// over 64 goroutines, each response checked by get, with the process's CPU,
// syscalls and context switches reported per request.
func benchServedGets(b *testing.B, name string, newRT func() http.RoundTripper, url string,
	get func(*testing.B, http.RoundTripper, *http.Request, []byte)) {
	benchServedRows(b, name, newRT, url, 512, get)
}

// benchServedRows is benchServedGets with the size of each goroutine's
// body buffer (get may also send its own request built from the GET
// template it is given, as the upload rows do).
func benchServedRows(b *testing.B, name string, newRT func() http.RoundTripper, url string, bufLen int,
	get func(*testing.B, http.RoundTripper, *http.Request, []byte)) {
	b.Run(name+"/serial", func(b *testing.B) {
		rt := newRT()
		defer closeIdle(rt)
		req, _ := http.NewRequest("GET", url, nil)
		buf := make([]byte, bufLen)
		get(b, rt, req, buf) // warm the connection
		b.ReportAllocs()
		b.ResetTimer()
		before := markCost()
		for i := 0; i < b.N; i++ {
			get(b, rt, req, buf)
		}
		b.StopTimer()
		reportCost(b, before)
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		rt := newRT()
		defer closeIdle(rt)
		warm, _ := http.NewRequest("GET", url, nil)
		get(b, rt, warm, make([]byte, bufLen))
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // 64 goroutines
		b.ReportAllocs()
		b.ResetTimer()
		before := markCost()
		b.RunParallel(func(pb *testing.PB) {
			req, _ := http.NewRequest("GET", url, nil)
			buf := make([]byte, bufLen)
			for pb.Next() {
				get(b, rt, req, buf)
			}
		})
		b.StopTimer()
		reportCost(b, before)
	})
}
