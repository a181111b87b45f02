package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/ferryhttp/ferry/altsvc"
	"github.com/ferryhttp/ferry/internal/dnscache"
	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
	"github.com/ferryhttp/ferry/internal/proccost"
	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// The bounds on HTTP/3 work a Transport does on its own: one QUIC dial per
// origin at a time, at most maxConcurrentH3Dials at once over all origins,
// and idle HTTP/3 connections within MaxIdleConns / MaxIdleConnsPerHost.

// quicBlackhole is a UDP socket on 127.0.0.1 that reads every datagram and
// never answers, as a network dropping UDP would; it records the
// destination connection ID of every long-header (handshake) packet, one
// per QUIC dial (a client keeps its first ID until the server answers).
type quicBlackhole struct {
	pc   net.PacketConn
	port int
	done chan struct{}

	mu   sync.Mutex // guards dcid
	dcid map[string]bool
}

func startQUICBlackhole(t testing.TB) *quicBlackhole {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &quicBlackhole{pc: pc, port: pc.LocalAddr().(*net.UDPAddr).Port, done: make(chan struct{}), dcid: map[string]bool{}}
	go b.read()
	t.Cleanup(func() { pc.Close(); <-b.done })
	return b
}

func (b *quicBlackhole) read() {
	defer close(b.done)
	buf := make([]byte, 2048)
	for {
		n, _, err := b.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		// Long header: form bit, 4-byte version, DCID length, DCID.
		if n < 6 || buf[0]&0x80 == 0 || n < 6+int(buf[5]) {
			continue
		}
		id := string(buf[6 : 6+int(buf[5])])
		b.mu.Lock()
		b.dcid[id] = true
		b.mu.Unlock()
	}
}

// dials is the number of distinct QUIC dials seen.
func (b *quicBlackhole) dials() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.dcid)
}

// goroutinePeak samples runtime.NumGoroutine until stop is called, which
// returns the highest value seen.
func goroutinePeak() (stop func() int) {
	var peak atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := int64(runtime.NumGoroutine()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int { close(quit); <-done; return int(peak.Load()) }
}

var (
	wildcardCertOnce sync.Once
	wildcardCert     *selfsigned.Cert
	wildcardCertErr  error
)

// testWildcardCert is a certificate for every name under .test (which the
// tests map to 127.0.0.1 with dnstest) and 127.0.0.1.
func testWildcardCert(t testing.TB) *selfsigned.Cert {
	wildcardCertOnce.Do(func() { wildcardCert, wildcardCertErr = selfsigned.New("*.test", "127.0.0.1") })
	if wildcardCertErr != nil {
		t.Fatal(wildcardCertErr)
	}
	return wildcardCert
}

// manyOrigins serves HTTP/1.1 over TLS on 127.0.0.1 for n names
// o0.test ... o(n-1).test, resolved by dns, whose responses advertise
// altSvc; it returns the URL of origin i.
func manyOrigins(t testing.TB, dns *dnstest.Server, n int, h http.Handler) func(i int) string {
	cert := testWildcardCert(t)
	srv := &http.Server{Handler: h, TLSConfig: cert.ServerConfig(), ErrorLog: nilLogger()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.ServeTLS(ln, "", ""); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	port := ln.Addr().(*net.TCPAddr).Port
	for i := range n {
		dns.Set(fmt.Sprintf("o%d.test", i), "127.0.0.1")
	}
	return func(i int) string { return fmt.Sprintf("https://o%d.test:%d/", i, port) }
}

// get sends a GET of u and reads the response; it returns the protocol.
func get(t testing.TB, rt http.RoundTripper, u string) string {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Proto
}

// TestH3OneDialPerOrigin: an origin whose every response names 200 h3
// alternatives, a different one first each time, all of them behind a
// UDP blackhole, gets one QUIC dial at a time (the next only after it
// failed), not one per response, and its goroutines stay few; every
// request is answered over TCP.
func TestH3OneDialPerOrigin(t *testing.T) {
	const alts, responses = 200, 300
	hole := startQUICBlackhole(t)
	dns := dnstest.Start(t)
	for i := range alts {
		dns.Set(fmt.Sprintf("a%d.test", i), "127.0.0.1")
	}
	var served atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(served.Add(1))
		var b strings.Builder
		for j := range alts {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `h3="a%d.test:%d"; ma=3600`, (i+j)%alts, hole.port)
		}
		w.Header().Set("Alt-Svc", b.String())
	})
	u := startTLS(t, h)
	tr := newH3Transport(t, func(tr *Transport) { tr.Resolver = dns.Resolver() })
	base := runtime.NumGoroutine()
	stop := goroutinePeak()
	start := time.Now()
	for i := range responses {
		if p := get(t, tr, u); !isTCPProto(p) {
			t.Fatalf("request %d: %s, want TCP (every alternative is blackholed)", i, p)
		}
	}
	elapsed := time.Since(start)
	peak := stop()
	if n := tr.h3.flights.Peak(); n > 1 {
		t.Errorf("%d QUIC dials at once for one origin, want at most 1", n)
	}
	// A blackholed dial lasts quic-go's handshake idle timeout (5 s): one
	// after another, at most one per second is a generous bound.
	if n, limit := hole.dials(), 1+int(elapsed/time.Second); n > limit {
		t.Errorf("%d QUIC dials reached the blackhole in %v, want at most %d", n, elapsed.Round(time.Millisecond), limit)
	}
	if peak-base > 150 {
		t.Errorf("goroutines rose from %d to %d during %d responses, want fewer than 150 more", base, peak, responses)
	}
	t.Logf("%d responses in %v: %d dials seen, %d at once at most, goroutines %d -> %d",
		responses, elapsed.Round(time.Millisecond), hole.dials(), tr.h3.flights.Peak(), base, peak)
}

// TestH3DialsCappedAcrossOrigins: many origins, each advertising an h3
// alternative behind a UDP blackhole, requested concurrently: no more than
// maxConcurrentH3Dials QUIC dials run at once, and every request is
// answered over TCP without waiting for QUIC beyond the dials it joined.
func TestH3DialsCappedAcrossOrigins(t *testing.T) {
	const origins, workers = 64, 4
	hole := startQUICBlackhole(t)
	dns := dnstest.Start(t)
	alt := fmt.Sprintf(`h3=":%d"; ma=3600`, hole.port)
	url := manyOrigins(t, dns, origins, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Alt-Svc", alt)
	}))
	tr := &Transport{Resolver: dns.Resolver(), TLSClientConfig: testWildcardCert(t).ClientConfig()}
	t.Cleanup(tr.CloseIdleConnections)
	start := time.Now()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < origins; i = int(next.Add(1)) - 1 {
				// Twice per origin: the second request may find the
				// alternative usable and would dial if the cap allowed.
				for range 2 {
					req, _ := http.NewRequest("GET", url(i), nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						errs <- err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if !isTCPProto(resp.Proto) {
						errs <- fmt.Errorf("origin %d: %s, want TCP", i, resp.Proto)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if n := tr.h3.flights.Peak(); n > maxConcurrentH3Dials {
		t.Errorf("%d QUIC dials at once, want at most %d", n, maxConcurrentH3Dials)
	}
	// Each blackholed dial lasts about 5 s (quic-go's handshake idle
	// timeout): within the elapsed time, at most the cap per 4 s.
	if n, limit := hole.dials(), maxConcurrentH3Dials*(1+int(elapsed/(4*time.Second))); n > limit {
		t.Errorf("%d QUIC dials reached the blackhole in %v, want at most %d", n, elapsed.Round(time.Millisecond), limit)
	}
	t.Logf("%d origins in %v: %d dials seen, %d at once at most", origins, elapsed.Round(time.Millisecond), hole.dials(), tr.h3.flights.Peak())
}

// quicConnCounter counts the QUIC connections an http3.Server has open.
type quicConnCounter struct{ open, total atomic.Int64 }

func (c *quicConnCounter) connContext(ctx context.Context, qc *quic.Conn) context.Context {
	c.open.Add(1)
	c.total.Add(1)
	context.AfterFunc(qc.Context(), func() { c.open.Add(-1) })
	return ctx
}

// startCountingH3 serves h over HTTP/3 with the wildcard certificate on a
// UDP port of 127.0.0.1, counting its QUIC connections.
func startCountingH3(t testing.TB, h http.Handler) (int, *quicConnCounter) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cnt := &quicConnCounter{}
	s := &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(testWildcardCert(t).ServerConfig()), ConnContext: cnt.connContext}
	done := make(chan struct{})
	go func() { s.Serve(pc); close(done) }()
	t.Cleanup(func() { s.Close(); pc.Close(); <-done })
	return pc.LocalAddr().(*net.UDPAddr).Port, cnt
}

// h3Origins serves n origins over TCP and HTTP/3, each advertising the
// HTTP/3 server, and returns their URLs and the server's connection count.
func h3Origins(t *testing.T, dns *dnstest.Server, n int) (func(int) string, *quicConnCounter) {
	h := &protoHandler{}
	port, cnt := startCountingH3(t, h)
	h.setAltSvc(fmt.Sprintf(`h3=":%d"; ma=3600`, port))
	return manyOrigins(t, dns, n, h), cnt
}

// upgradeAll makes one request per origin over TCP, then, once the
// origin's HTTP/3 connection is up, one over HTTP/3.
func upgradeAll(t *testing.T, tr *Transport, url func(int) string, n int) {
	for i := range n {
		get(t, tr, url(i))
		eventually(t, "an HTTP/3 connection to "+url(i), func() bool { return h3Ready(t, tr, url(i)) })
		if p := get(t, tr, url(i)); p != "HTTP/3.0" {
			t.Fatalf("origin %d: second request over %s, want HTTP/3.0", i, p)
		}
	}
}

// TestH3IdleWithinMaxIdleConns: with 12 origins served over HTTP/3 and
// MaxIdleConns 4, the idle HTTP/3 connections beyond the limit (counted
// with the idle TCP ones) are closed: the server sees at most 4 open.
func TestH3IdleWithinMaxIdleConns(t *testing.T) {
	const origins, maxIdle = 12, 4
	dns := dnstest.Start(t)
	url, cnt := h3Origins(t, dns, origins)
	tr := &Transport{Resolver: dns.Resolver(), TLSClientConfig: testWildcardCert(t).ClientConfig(), MaxIdleConns: maxIdle}
	t.Cleanup(tr.CloseIdleConnections)
	upgradeAll(t, tr, url, origins)
	if cnt.total.Load() < origins {
		t.Fatalf("%d QUIC connections made for %d origins", cnt.total.Load(), origins)
	}
	eventually(t, fmt.Sprintf("at most %d idle connections", maxIdle), func() bool {
		return int(cnt.open.Load())+tr.pool.IdleTotal() <= maxIdle
	})
	// The most recently used origin kept its connection.
	if p := get(t, tr, url(origins-1)); p != "HTTP/3.0" {
		t.Fatalf("last origin again: %s, want HTTP/3.0", p)
	}
	t.Logf("%d QUIC connections made, %d open, %d idle TCP", cnt.total.Load(), cnt.open.Load(), tr.pool.IdleTotal())
}

// TestH3IdleWithinMaxIdleConnsPerHost: MaxIdleConnsPerHost counts an
// origin's idle HTTP/3 connection with its idle TCP ones: with 1, the
// idle TCP connection goes and the HTTP/3 one stays; with -1 (keep none)
// the HTTP/3 connection is closed once its request ended, as a TCP one is.
func TestH3IdleWithinMaxIdleConnsPerHost(t *testing.T) {
	for _, perHost := range []int{1, -1} {
		t.Run(fmt.Sprint("per_host_", perHost), func(t *testing.T) {
			dns := dnstest.Start(t)
			url, cnt := h3Origins(t, dns, 1)
			tr := &Transport{Resolver: dns.Resolver(), TLSClientConfig: testWildcardCert(t).ClientConfig(), MaxIdleConnsPerHost: perHost}
			t.Cleanup(tr.CloseIdleConnections)
			key := connKeyOf(t, tr, url(0))
			if perHost > 0 {
				upgradeAll(t, tr, url, 1)
				eventually(t, "one idle connection for the origin", func() bool {
					return int(cnt.open.Load())+tr.pool.IdleLen(key) <= perHost
				})
				if n := cnt.open.Load(); n != 1 {
					t.Fatalf("%d QUIC connections open, want the HTTP/3 one kept", n)
				}
				return
			}
			get(t, tr, url(0)) // over TCP, not kept idle; starts the QUIC dial
			eventually(t, "the QUIC connection", func() bool { return cnt.total.Load() == 1 })
			for i := 0; i < 3; i++ {
				get(t, tr, url(0))
			}
			eventually(t, "no idle QUIC connection", func() bool { return cnt.open.Load() == 0 })
		})
	}
}

// resourceUse is what resourcePeak measured: each figure above what was
// measured (after a GC) when sampling began.
type resourceUse struct {
	goroutines int    // the highest runtime.NumGoroutine
	heap       uint64 // the highest HeapAlloc: live objects and garbage not yet collected
	live       uint64 // the highest live heap a collection found (/gc/heap/live:bytes)
	liveMedian uint64 // the median of the live heap samples: what the run typically held
	retained   uint64 // the heap after a GC at the stop
}

// resourcePeak samples goroutines and heap every 20 ms until stop, which
// returns what it measured. The peaks depend on where the collections
// fall (a collection that runs long on a loaded machine counts more of
// what was allocated meanwhile as live); the median live heap and the
// retained heap much less.
func resourcePeak() (stop func() resourceUse) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	liveBase := sample[0].Value.Uint64()
	var u resourceUse
	var lives []uint64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			u.goroutines = max(u.goroutines, runtime.NumGoroutine())
			runtime.ReadMemStats(&ms)
			u.heap = max(u.heap, max(ms.HeapAlloc, base)-base)
			metrics.Read(sample)
			lives = append(lives, max(sample[0].Value.Uint64(), liveBase)-liveBase)
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() resourceUse {
		close(quit)
		<-done
		slices.Sort(lives)
		u.live, u.liveMedian = lives[len(lives)-1], lives[len(lives)/2]
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		u.retained = max(ms.HeapAlloc, base) - base
		return u
	}
}

// TestH3BlackholeOriginsCost measures what N origins cost whose Alt-Svc
// names an HTTP/3 alternative behind a UDP blackhole: one GET per origin
// from 8 goroutines, through ferry and through net/http (which ignores
// Alt-Svc: the same requests over TCP) in the same run, both with
// MaxIdleConns 100, and through ferry with DisableHTTP3 to tell the cost of
// HTTP/3 from that of ferry's other caches. It reports peak goroutines,
// peak and retained heap growth and elapsed time. Each run starts once the
// previous client's connections are gone on both sides, so that none is
// charged for another's.
//
// It fails if ferry peaks at more goroutines than net/http, or holds more
// heap than net/http plus what ferry's bounded caches hold and net/http
// has no equivalent for: the Alt-Svc cache (altsvc.DefaultMaxOrigins
// origins) and the DNS cache (dnscache.DefaultMaxEntries names), both
// filled to their bounds with this test's names and measured here. That
// memory is the features themselves (HTTP/3 discovery, fewer lookups) and
// does not grow with N; anything else above net/http would be waste. The
// retained heap and the live heap the run typically held (the median of
// its samples) are held to that, with a slack for run-to-run variation and
// the QUIC dials in flight; the peaks, which depend on where collections
// fall, more loosely (see below).
//
// It runs only when FERRY_BLACKHOLE_ORIGINS gives N (100000 is the case it
// was written for), and never with -short.
func TestH3BlackholeOriginsCost(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("FERRY_BLACKHOLE_ORIGINS"), &n)
	if testing.Short() || n <= 0 {
		t.Skip("set FERRY_BLACKHOLE_ORIGINS=N (and no -short) to measure N blackholed origins")
	}
	const workers = 8
	hole := startQUICBlackhole(t)
	dns := dnstest.Start(t)
	alt := fmt.Sprintf(`h3=":%d"; ma=3600`, hole.port)
	url := manyOrigins(t, dns, n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Alt-Svc", alt)
	}))
	cert := testWildcardCert(t)
	// FERRY_BLACKHOLE_HEAPPROFILE=prefix writes heap profiles of each
	// client's run (1 ferry, 2 ferry without HTTP/3, 3 net/http): prefix.K.base
	// before it, prefix.K.mid halfway, prefix.K.end after it; compare with
	// go tool pprof -sample_index=inuse_space -diff_base prefix.K.base prefix.K.end.
	var profiles atomic.Int32
	if os.Getenv("FERRY_BLACKHOLE_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 4096
	}
	type cost struct {
		resourceUse
		elapsed time.Duration
		cpu     time.Duration // the process's, the servers' included
	}
	run := func(rt http.RoundTripper) (c cost) {
		prof := os.Getenv("FERRY_BLACKHOLE_HEAPPROFILE")
		writeHeap := func(suffix string) {
			if prof == "" {
				return
			}
			f, err := os.Create(fmt.Sprintf("%s.%d.%s", prof, profiles.Load(), suffix))
			if err != nil {
				t.Error(err)
				return
			}
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
		profiles.Add(1)
		runtime.GC()
		writeHeap("base")
		stop := resourcePeak()
		start, cpu := time.Now(), proccost.Read()
		var wg sync.WaitGroup
		var next atomic.Int64
		var failed atomic.Int64
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					req, _ := http.NewRequest("GET", url(i), nil)
					resp, err := rt.RoundTrip(req)
					if err != nil {
						if failed.Add(1) == 1 {
							t.Errorf("origin %d: %v", i, err)
						}
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if i == n/2 {
						writeHeap("mid") // as of the last GC, unforced
					}
				}
			}()
		}
		wg.Wait()
		c.elapsed, c.cpu = time.Since(start), proccost.Since(cpu).CPU
		c.resourceUse = stop()
		writeHeap("end") // stop ran a GC
		return c
	}

	// settle waits until the goroutines are back to their number before
	// the first run: the previous client's connections closed on both
	// sides (the server's included) and its background dials ended.
	settledAt := runtime.NumGoroutine()
	settle := func() {
		deadline := time.Now().Add(time.Minute)
		for runtime.NumGoroutine() > settledAt && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if g := runtime.NumGoroutine(); g > settledAt {
			t.Logf("%d goroutines still running, %d before the first run", g, settledAt)
		}
	}
	caches := boundedCachesSize(t, dns, min(n, dnscache.DefaultMaxEntries), min(n, altsvc.DefaultMaxOrigins), url, alt)

	fer := &Transport{Resolver: dns.Resolver(), TLSClientConfig: cert.ClientConfig(), MaxIdleConns: 100}
	fc := run(fer)
	dials, peak := hole.dials(), fer.h3.flights.Peak()
	fer.CloseIdleConnections()
	settle()

	// ferry without HTTP/3: what its other caches (DNS, TLS sessions, the
	// pool's key records) cost, to tell them from the QUIC dials.
	noh3 := &Transport{Resolver: dns.Resolver(), TLSClientConfig: cert.ClientConfig(), MaxIdleConns: 100, DisableHTTP3: true}
	nc := run(noh3)
	noh3.CloseIdleConnections()
	settle()

	std := &http.Transport{
		DialContext:     (&net.Dialer{Resolver: dns.Resolver()}).DialContext,
		TLSClientConfig: cert.ClientConfig(),
		MaxIdleConns:    100,
	}
	sc := run(std)
	std.CloseIdleConnections()

	t.Logf("%d origins, %d workers", n, workers)
	mb := func(b uint64) float64 { return float64(b) / (1 << 20) }
	for _, r := range []struct {
		name string
		c    cost
	}{{"ferry", fc}, {"ferry without HTTP/3", nc}, {"net/http", sc}} {
		t.Logf("%-21s %4d goroutines peak, heap +%5.1f MB peak, live +%5.1f MB peak +%5.1f MB median, +%5.1f MB retained, %v (CPU %v)",
			r.name+":", r.c.goroutines, mb(r.c.heap), mb(r.c.live), mb(r.c.liveMedian), mb(r.c.retained), r.c.elapsed.Round(time.Millisecond), r.c.cpu.Round(time.Millisecond))
	}
	t.Logf("ferry: %d QUIC dials, %d at once at most", dials, peak)
	t.Logf("ferry's bounded caches, full: %.1f MB", mb(caches))
	if fc.goroutines > sc.goroutines {
		t.Errorf("ferry peaked at %d goroutines, net/http at %d", fc.goroutines, sc.goroutines)
	}
	// slack: what varies between runs of the same client (net/http's live
	// heap moved by 1 MB between runs at N=10,000) and ferry's QUIC dials
	// in flight, at most maxConcurrentH3Dials (~0.2 MB in heap profiles).
	const slack = 2 << 20
	if fc.retained > sc.retained+caches+slack {
		t.Errorf("ferry retained %.1f MB, net/http %.1f MB, ferry's caches %.1f MB", mb(fc.retained), mb(sc.retained), mb(caches))
	}
	if fc.liveMedian > sc.liveMedian+caches+slack {
		t.Errorf("ferry's live heap was typically %.1f MB above its start, net/http's %.1f MB, ferry's caches %.1f MB", mb(fc.liveMedian), mb(sc.liveMedian), mb(caches))
	}
	// The peaks are held to the same with more room, as where collections
	// fall moves them: on a machine with load 7, at N=100,000, ferry's live
	// peak was 2.3 MB above net/http's plus the caches while heap profiles
	// halfway showed nothing above net/http but the caches. The HeapAlloc
	// peak also counts garbage awaiting collection, up to about as much as
	// is live (GOGC=100), so what ferry holds counts twice in it.
	if fc.live > sc.live+caches+2*slack {
		t.Errorf("ferry's live heap peaked %.1f MB above its start, net/http's %.1f MB, ferry's caches %.1f MB", mb(fc.live), mb(sc.live), mb(caches))
	}
	if fc.heap > sc.heap+2*(caches+2*slack) {
		t.Errorf("ferry's heap peaked %.1f MB above its start, net/http's %.1f MB, ferry's caches %.1f MB", mb(fc.heap), mb(sc.heap), mb(caches))
	}
}

// boundedCachesSize returns the heap an Alt-Svc cache holding alt for
// origins url(0) ... url(origins-1) and a DNS cache holding names of
// url(0) ... url(names-1) take: what a Transport's caches hold at their
// bounds in TestH3BlackholeOriginsCost.
func boundedCachesSize(t *testing.T, dns *dnstest.Server, names, origins int, url func(int) string, alt string) uint64 {
	hostPort := func(i int) string {
		u, err := neturl.Parse(url(i))
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	ac := altsvc.New(altsvc.Options{})
	for i := range origins {
		o, err := altsvc.OriginFromHostPort("https", hostPort(i))
		if err != nil {
			t.Fatal(err)
		}
		ac.UpdateFromResponse(o, []string{alt}, 0)
	}
	dc := dnscache.New(dnscache.Config{Resolver: dns.Resolver()})
	for i := range names {
		host, _, _ := net.SplitHostPort(hostPort(i))
		if _, err := dc.LookupNetIP(t.Context(), host); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if ac.Len() != origins || dc.Stats().Entries != names {
		t.Fatalf("caches hold %d origins and %d names, want %d and %d", ac.Len(), dc.Stats().Entries, origins, names)
	}
	runtime.KeepAlive(ac)
	runtime.KeepAlive(dc)
	return max(ms.HeapAlloc, before) - before
}
