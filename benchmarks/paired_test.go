package benchmarks

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/proccost"
	"github.com/ferryhttp/ferry/transport"
	"github.com/valyala/fasthttp"
)

// BenchmarkPaired/{g1,g64} measures the three clients in the same loop:
// the requests are cut into chunks of about 50 ms and the clients take turns
// chunk by chunk (ferry, fasthttp, net/http, floor, then the reverse
// order), each chunk's process CPU charged to the client that ran it. On a shared VM the
// cost of the same binary drifts by a quarter from one second to the next;
// taking turns every few milliseconds exposes all clients to the same drift,
// which separate one-second benchmarks (BenchmarkClient) do not.
//
// "floor" is fasthttp plus the objects a RoundTripper must return
// (roundTripFloor): the part of the gap to fasthttp that no RoundTripper
// can avoid.
//
// b.N is the number of requests each client makes. Reported per request and
// per client: <client>-cpu-ns/op, -user-ns/op (the client's code and the
// Go runtime) and -sys-ns/op (the kernel: mostly loopback TCP); and the ratios ferry/fasthttp,
// floor/fasthttp, ferry/floor and nethttp/fasthttp of those. Every response is checked as in
// BenchmarkClient.

// pairedChunk is how long one turn lasts, roughly.
const pairedChunk = 50 * time.Millisecond

// pairedClient is one client under test and its per-goroutine operations.
type pairedClient struct {
	name string
	ops  []func() // one per goroutine of the g64 row (ops[0] for g1)
	done func()
	cost proccost.Cost // charged so far
	wall time.Duration // wall time of its turns so far
}

func newPairedClients(b *testing.B, url, addr string, goroutines int) []*pairedClient {
	ft := &transport.Transport{MaxIdleConnsPerHost: 128}
	nt := &http.Transport{MaxIdleConnsPerHost: 128}
	fc := &fasthttp.HostClient{Addr: addr, MaxConns: 128}
	clients := []*pairedClient{
		{name: "ferry", done: ft.CloseIdleConnections},
		{name: "fasthttp", done: fc.CloseIdleConnections},
		{name: "nethttp", done: nt.CloseIdleConnections},
	}
	ff := &fasthttp.HostClient{Addr: addr, MaxConns: 128}
	clients = append(clients, &pairedClient{name: "floor", done: ff.CloseIdleConnections})
	doers := map[string]doer{
		"ferry":    roundTripper(ft, url),
		"fasthttp": fastClient(fc, url),
		"nethttp":  roundTripper(nt, url),
		"floor":    roundTripFloor(ff, url),
	}
	for _, c := range clients {
		for range goroutines {
			c.ops = append(c.ops, doers[c.name](b))
		}
	}
	return clients
}

// runChunk makes n requests with c spread over its goroutines (one
// goroutine: on the caller's) and returns what the process spent on them.
func (c *pairedClient) runChunk(n int) proccost.Cost {
	before := proccost.Read()
	if len(c.ops) == 1 {
		op := c.ops[0]
		for range n {
			op()
		}
		return proccost.Since(before)
	}
	var wg sync.WaitGroup
	per := n / len(c.ops)
	for i, op := range c.ops {
		k := per
		if i < n%len(c.ops) {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				op()
			}
		}()
	}
	wg.Wait()
	return proccost.Since(before)
}

// runTurns warms every client with warm requests, sizes a turn from the
// slowest client so that one turn lasts about pairedChunk (a multiple of
// per, the goroutines of a client), makes b.N requests with each client in
// turns (order reversed every turn), reports each client's
// <name>-cpu-ns/op and returns those figures by name (each client's whole
// cost stays in its cost field).
func runTurns(b *testing.B, clients []*pairedClient, warm, per int) map[string]float64 {
	chunk := 1
	for _, c := range clients {
		start := time.Now()
		c.runChunk(warm)
		perReq := time.Since(start) / time.Duration(warm)
		chunk = max(chunk, int(pairedChunk/max(perReq, time.Microsecond)))
	}
	chunk = max(per, chunk/per*per)
	b.ResetTimer()
	for done, turn := 0, 0; done < b.N; turn++ {
		n := min(chunk, b.N-done)
		for i := range clients {
			c := clients[i]
			if turn%2 == 1 {
				c = clients[len(clients)-1-i]
			}
			start := time.Now()
			c.cost = c.cost.Plus(c.runChunk(n))
			c.wall += time.Since(start)
		}
		done += n
	}
	b.StopTimer()
	perOp := map[string]float64{}
	for _, c := range clients {
		perOp[c.name] = float64(c.cost.CPU.Nanoseconds()) / float64(b.N)
		b.ReportMetric(perOp[c.name], c.name+"-cpu-ns/op")
	}
	return perOp
}

func BenchmarkPaired(b *testing.B) {
	addr := startServer(b)
	url := "http://" + addr + "/bench"
	for _, g := range []int{1, 64} {
		b.Run("g"+strconv.Itoa(g), func(b *testing.B) {
			clients := newPairedClients(b, url, addr, g)
			defer func() {
				for _, c := range clients {
					c.done()
				}
			}()
			perOp := runTurns(b, clients, 4*g, g)
			for _, c := range clients {
				u, s := c.cost.UserSysPerOp(b.N)
				b.ReportMetric(u, c.name+"-user-ns/op")
				b.ReportMetric(s, c.name+"-sys-ns/op")
			}
			b.ReportMetric(perOp["ferry"]/perOp["fasthttp"], "ferry/fasthttp")
			b.ReportMetric(perOp["floor"]/perOp["fasthttp"], "floor/fasthttp")
			b.ReportMetric(perOp["ferry"]/perOp["floor"], "ferry/floor")
			b.ReportMetric(perOp["nethttp"]/perOp["fasthttp"], "nethttp/fasthttp")
		})
	}
}

// floorResp keeps the last response the floor client built, so the
// compiler cannot drop the work.
var floorResp *http.Response

// floorKeys are the header names of the benchmark server's response.
var floorKeys = []string{"Content-Length", "Content-Type", "Server", "X-Request-Id"}

// roundTripFloor is the fasthttp client plus the least any RoundTripper must
// add: a fresh *http.Response and Header map per request whose values
// outlive the connection's buffer (one copy of the header bytes, one
// []string backing the four values). It is no client anyone would use; it
// shows how much of the budget the RoundTripper contract itself takes.
func roundTripFloor(c *fasthttp.HostClient, url string) doer {
	return func(b *testing.B) func() {
		get, resp := fastOp(b, c, url)
		return func() {
			get()
			r := &http.Response{StatusCode: 200, Header: make(http.Header, len(floorKeys))}
			vals := make([]string, len(floorKeys))
			head := string(resp.Header.Header())
			for i, k := range floorKeys {
				vals[i] = head[i : i+1]
				r.Header[k] = vals[i : i+1 : i+1]
			}
			floorResp = r
		}
	}
}
