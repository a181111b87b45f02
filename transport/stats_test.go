package transport

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// skipWithoutCounting skips tests of the request-path counters in a
// ferry_nostats build, where they are compiled out.
func skipWithoutCounting(t *testing.T) {
	if !countStats {
		t.Skip("built with ferry_nostats: request-path counters are off")
	}
}

// getN sends n GETs to u on tr, checking every response.
func getN(t *testing.T, tr http.RoundTripper, u string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		resp, body := fetch(t, tr, "GET", u, nil)
		if resp.StatusCode != 200 || body == "" {
			t.Fatalf("request %d: status %d, body %q", i, resp.StatusCode, body)
		}
	}
}

// TestStatsHTTP1 checks the HTTP/1.1 figures against what the requests
// must have done: one dial and reuse with keep-alive, a dial per request
// without; DNS resolved once per name and then answered from the cache.
func TestStatsHTTP1(t *testing.T) {
	skipWithoutCounting(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	const n = 5
	tests := []struct {
		name       string
		keepAlives bool
		want       Stats // only the fields compared below
	}{
		{"keep-alive", true, Stats{
			Requests: RequestStats{H1: n},
			Conns:    ConnStats{Dialled: 1, OpenH1: 1, IdleH1: 1},
			Pool:     PoolStats{Hits: n - 1, Misses: 1},
			DNS:      DNSStats{Misses: 1, Entries: 1},
		}},
		{"no-keep-alive", false, Stats{
			Requests: RequestStats{H1: n},
			Conns:    ConnStats{Dialled: n},
			Pool:     PoolStats{Misses: n},
			DNS:      DNSStats{Hits: n - 1, Misses: 1, Entries: 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Transport{DisableKeepAlives: !tc.keepAlives}
			defer tr.CloseIdleConnections()
			if st := tr.Stats(); st != (Stats{}) {
				t.Fatalf("unused Transport: %+v, want all zero", st)
			}
			getN(t, tr, u, n)
			got := tr.Stats()
			cmp := Stats{Requests: got.Requests, Conns: got.Conns, DNS: got.DNS,
				Pool: PoolStats{Hits: got.Pool.Hits, Misses: got.Pool.Misses}}
			if cmp != tc.want {
				t.Fatalf("after %d requests:\n got %+v\nwant %+v", n, cmp, tc.want)
			}
			tr.CloseIdleConnections()
			if c := tr.Stats().Conns; c.OpenH1 != 0 || c.IdleH1 != 0 {
				t.Fatalf("after CloseIdleConnections: %+v, want no connection open", c)
			}
		})
	}
}

// TestStatsRetry: a server that answers a connection's first request and
// closes the connection on reading its second (without saying so) makes
// the second GET fail on its reused connection; it is retried on a new
// one, and Retries counts it. The server closes only once the second
// request is at it: closed after the first response, the client could see
// the close while the connection is idle and dial for the second GET
// without a retry.
func TestStatsRetry(t *testing.T) {
	skipWithoutCounting(t)
	s := startRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		c.readRequest() // then closed unanswered
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	getN(t, tr, s.URL, 2)
	st := tr.Stats()
	if st.Requests.H1 != 2 || st.Requests.Retries != 1 || st.Conns.Dialled != 2 {
		t.Fatalf("requests %+v, dialled %d; want 2 over h1, 1 retry, 2 dials", st.Requests, st.Conns.Dialled)
	}
}

// TestStatsDialError: a refused dial is counted and leaves nothing open.
func TestStatsDialError(t *testing.T) {
	skipWithoutCounting(t)
	u := "http://" + testpeer.RefusingAddr(t)
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", u, nil)
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("request to a closed port succeeded")
	}
	st := tr.Stats()
	if st.Conns.DialErrors != 1 || st.Conns.Dialled != 0 || st.Conns.OpenH1 != 0 || st.Requests.Total() != 0 {
		t.Fatalf("after a refused dial: %+v, %+v", st.Conns, st.Requests)
	}
}

// TestStatsHTTP2: requests share one HTTP/2 connection; the pool reports
// it as shared and every request after the first reserved a stream on it.
func TestStatsHTTP2(t *testing.T) {
	skipWithoutCounting(t)
	u := startTLSProto(t, &protoHandler{}, true)
	tr := newH3Transport(t, func(tr *Transport) { tr.ForceAttemptHTTP2 = true })
	const n = 4
	getN(t, tr, u, n)
	st := tr.Stats()
	if st.Requests.H2 != n || st.Requests.H1 != 0 || st.Conns.Dialled != 1 ||
		st.Conns.OpenH2 != 1 || st.Conns.OpenH1 != 0 || st.Pool.SharedHits != n-1 {
		t.Fatalf("after %d HTTP/2 requests: %+v %+v %+v", n, st.Requests, st.Conns, st.Pool)
	}
}

// TestStatsHTTP3: the Alt-Svc header of the first (TCP) response leads to
// one QUIC connection (an upgrade); the next requests count as HTTP/3.
func TestStatsHTTP3(t *testing.T) {
	skipWithoutCounting(t)
	u := startWrapped(t, &protoHandler{})
	tr := newH3Transport(t, nil)
	getN(t, tr, u, 1)
	eventually(t, "the background QUIC handshake", func() bool { return h3Ready(t, tr, u) })
	getN(t, tr, u, 3)
	st := tr.Stats()
	if st.Requests.H3 != 3 || st.Requests.Total() != 4 || st.AltSvc.Upgrades != 1 ||
		st.AltSvc.Broken != 0 || st.AltSvc.Origins != 1 || st.Conns.OpenH3 != 1 {
		t.Fatalf("after the switch to HTTP/3: %+v %+v %+v", st.Requests, st.AltSvc, st.Conns)
	}
}

// TestStatsBrokenAlternative: an advertised alternative whose UDP port
// swallows everything fails its QUIC dial; Broken counts it and no request
// is lost (they all go over TCP).
func TestStatsBrokenAlternative(t *testing.T) {
	skipWithoutCounting(t)
	port := blackholeUDP(t)
	h := &protoHandler{}
	h.setAltSvc(altValue("", port))
	u := startTLSProto(t, h, false)
	tr := newH3Transport(t, func(tr *Transport) { tr.h3.handshakeTimeout = 200 * time.Millisecond })
	getN(t, tr, u, 1)
	eventually(t, "the alternative marked broken", func() bool { return brokenAlt(t, tr, u, port) })
	getN(t, tr, u, 2)
	st := tr.Stats()
	if st.AltSvc.Broken != 1 || st.AltSvc.Upgrades != 0 || st.Requests.H1 != 3 || st.Requests.H3 != 0 {
		t.Fatalf("with a broken alternative: %+v %+v", st.AltSvc, st.Requests)
	}
}

// TestStatsConcurrent reads Stats while requests run on many goroutines
// (for -race) and checks that no request was lost from the count.
func TestStatsConcurrent(t *testing.T) {
	skipWithoutCounting(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tr := &Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	const workers, each = 8, 25
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
				_ = tr.Stats()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				resp, err := tr.RoundTrip(mustRequest(srv.URL))
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "ok" {
					errs <- fmt.Errorf("body %q, %v", b, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := tr.Stats()
	if st.Requests.H1 != workers*each {
		t.Fatalf("Requests.H1 = %d, want %d", st.Requests.H1, workers*each)
	}
	if st.Conns.OpenH1 != int(st.Conns.Dialled) || st.Conns.IdleH1 != st.Conns.OpenH1 {
		t.Fatalf("all requests done: %+v; want every dialled connection open and idle", st.Conns)
	}
}

func mustRequest(u string) *http.Request {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		panic(err)
	}
	return req
}

// BenchmarkCountRequest measures what counting costs a request: the
// sharded counter Stats uses, next to a single shared atomic counter (the
// naive design), on one goroutine and on many.
func BenchmarkCountRequest(b *testing.B) {
	if !countStats {
		b.Skip("built with ferry_nostats: nothing is counted")
	}
	var s transportStats
	var one atomic.Uint64
	impls := []struct {
		name  string
		count func()
	}{
		{"sharded", func() { s.countRequest(protoH1) }},
		{"one-atomic", func() { one.Add(1) }},
	}
	for _, impl := range impls {
		b.Run(impl.name+"/serial", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				impl.count()
			}
		})
		// Contention needs several Ps: when benchmarks are pinned (the
		// default, see TestMain) this row runs on one; run it with
		// FERRY_BENCH_PIN=off to see the counters contend.
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					impl.count()
				}
			})
		})
	}
	var total uint64
	for i := range s.shards {
		total += s.shards[i].requests[protoH1].Load()
	}
	if total == 0 || one.Load() == 0 {
		b.Fatal("nothing was counted")
	}
}
