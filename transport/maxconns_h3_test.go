package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// MaxConnsPerHost over TCP and QUIC together (maxconns.go), over real
// loopback sockets. The client's connections are counted from outside
// ferry's slot bookkeeping: TCP sockets from the kernel's table
// (/proc/self/net/tcp: every socket of this process connected to the
// server's port that is not closing), QUIC ones from the QUIC connections
// the Transport made that are still usable plus the QUIC dials in progress.

// connSampler counts tr's connections to a server port until stopped and
// keeps the largest total it saw.
type connSampler struct {
	tr   *Transport
	port int
	// before holds the sockets to port that existed when the sampler
	// started (left by earlier tests whose server had the same port).
	before map[string]bool
	max    atomic.Int64
	stop   chan struct{}
	done   chan struct{}
	err    atomic.Pointer[error]
	at     atomic.Pointer[[2]int] // TCP and QUIC counts of a new maximum
}

func startConnSampler(t *testing.T, tr *Transport, port int) *connSampler {
	t.Helper()
	before := map[string]bool{}
	if _, err := tcpConnsTo(port, nil, before); err != nil {
		t.Skipf("cannot count TCP sockets: %v", err)
	}
	tr.h3init() // before the sampler reads its maps
	s := &connSampler{tr: tr, port: port, before: before, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	t.Cleanup(s.halt)
	return s
}

func (s *connSampler) run() {
	defer close(s.done)
	for {
		if err := s.sample(); err != nil {
			s.err.Store(&err)
			return
		}
		select {
		case <-s.stop:
			return
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// sample counts the connections and keeps the maximum, ignoring a count
// taken while connections opened or closed (see total). Tests also call it
// where they know a connection is open, so that a sampler too slow to
// catch short-lived connections still sees one.
func (s *connSampler) sample() error {
	for range 100 {
		n, stable, err := s.total()
		if err != nil {
			return err
		}
		if !stable {
			continue
		}
		for {
			m := s.max.Load()
			if int64(n) <= m || s.max.CompareAndSwap(m, int64(n)) {
				return nil
			}
		}
	}
	return nil
}

// total counts TCP, QUIC, TCP, QUIC and TCP again, and reports the count
// as stable when the reads of each protocol agree. A count whose reads
// straddle the close of a connection of one protocol and the open of one
// of the other (or, when the sampling goroutine is held up between reads,
// several such moves) would add connections that never lived at the same
// time; a limit exceeded for real lasts across the reads.
func (s *connSampler) total() (n int, stable bool, err error) {
	var tcp [3]int
	var q [2]int
	for i := range tcp {
		if tcp[i], err = tcpConnsTo(s.port, s.before, nil); err != nil {
			return 0, false, err
		}
		if i < len(q) {
			q[i] = quicConnsOf(s.tr)
		}
	}
	n = tcp[0] + q[0]
	stable = tcp[0] == tcp[1] && tcp[1] == tcp[2] && q[0] == q[1]
	if stable && int64(n) > s.max.Load() {
		s.at.Store(&[2]int{tcp[0], q[0]})
	}
	return n, stable, nil
}

func (s *connSampler) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// check stops the sampler and fails if it saw more than limit connections.
func (s *connSampler) check(t *testing.T, limit int) {
	t.Helper()
	s.halt()
	if e := s.err.Load(); e != nil {
		t.Fatalf("counting connections: %v", *e)
	}
	if err := s.sample(); err != nil {
		t.Fatalf("counting connections: %v", err)
	}
	if m := s.max.Load(); m == 0 {
		t.Fatal("the sampler never saw a connection: the counting is broken")
	} else if m > int64(limit) {
		t.Fatalf("saw %d connections (TCP and QUIC) at once, MaxConnsPerHost is %d (TCP and QUIC: %v)", m, limit, *s.at.Load())
	}
}

// quicConnsOf counts tr's usable QUIC connections and QUIC dials in
// progress. The connections are counted first: a flight stops counting as
// dialling before its connection is added, so a dial that lands between
// the two counts is missed rather than counted twice.
func quicConnsOf(tr *Transport) int {
	h := &tr.h3
	n := 0
	h.mu.Lock()
	for c := range h.conns {
		if c.Usable() {
			n++
		}
	}
	h.mu.Unlock()
	_, dialling := h.flights.Running()
	return n + dialling
}

// tcpConnsTo counts the TCP sockets (IPv4) whose remote port is port and
// that are connecting, established, or closed by the peer but not yet by
// their owner, except those in skip (by inode); it adds every socket to
// port it sees to record, when not nil.
func tcpConnsTo(port int, skip, record map[string]bool) (int, error) {
	f, err := os.Open("/proc/self/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	n := 0
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !strings.HasSuffix(fields[2], want) || skip[fields[9]] {
			continue
		}
		if record != nil {
			record[fields[9]] = true
		}
		switch fields[3] {
		case "01", "02", "08": // ESTABLISHED, SYN_SENT, CLOSE_WAIT
			n++
		}
	}
	return n, sc.Err()
}

func portOf(t *testing.T, u string) int {
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(pu.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// getProto sends a GET with a hang guard and returns the response's
// protocol.
func getProto(ctx context.Context, tr *Transport, u string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return "", err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(string(b), resp.Proto) {
		return "", fmt.Errorf("body %q over %s", b, resp.Proto)
	}
	return resp.Proto, nil
}

// burst sends n concurrent GETs and fails on any error.
func burst(t *testing.T, tr *Transport, u string, n int) map[string]int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	protos := map[string]int{}
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := getProto(context.Background(), tr, u)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			protos[p]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("request of a burst of %d: %v", n, err)
	}
	return protos
}

// TestMaxConnsMovesToH3WithinLimit: with MaxConnsPerHost 1 and 2, over
// HTTP/1.1 and HTTP/2, a sequence of requests and bursts of 16 to 64
// concurrent requests all succeed, the origin ends up on HTTP/3, and the
// client never holds more TCP and QUIC connections together than the
// limit. (Before the fix a limit of 1 left a TCP and a QUIC connection.)
func TestMaxConnsMovesToH3WithinLimit(t *testing.T) {
	for _, limit := range []int{1, 2} {
		for _, h2 := range []bool{false, true} {
			name := fmt.Sprintf("limit%d/%s", limit, map[bool]string{false: "http1", true: "http2"}[h2])
			t.Run(name, func(t *testing.T) {
				h := &protoHandler{}
				u := startWrapped(t, h)
				tr := newH3Transport(t, func(tr *Transport) {
					tr.MaxConnsPerHost = limit
					tr.ForceAttemptHTTP2 = h2
				})
				s := startConnSampler(t, tr, portOf(t, u))
				if p, err := getProto(context.Background(), tr, u); err != nil || !isTCPProto(p) {
					t.Fatalf("first request: %s, %v; want TCP", p, err)
				}
				s.sample() // its connection is idle in the pool
				for i := range 6 {
					if _, err := getProto(context.Background(), tr, u); err != nil {
						t.Fatalf("request %d: %v", i+2, err)
					}
				}
				for _, n := range []int{16, 64, 32} {
					burst(t, tr, u, n)
				}
				awaitHTTP3(t, tr, u)
				if got := burst(t, tr, u, 16); got["HTTP/3.0"] != 16 {
					t.Fatalf("burst after the move: %v, want all over HTTP/3", got)
				}
				s.check(t, limit)
			})
		}
	}
}

// TestMaxConnsBlackholeFallsBackWithinLimit: the alternative's UDP port
// never answers; the QUIC dial holds a slot until it gives up, every
// request succeeds over TCP, and TCP and QUIC together stay within the
// limit.
func TestMaxConnsBlackholeFallsBackWithinLimit(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(fmt.Sprintf("limit%d", limit), func(t *testing.T) {
			port := blackholeUDP(t)
			h := &protoHandler{}
			h.setAltSvc(altValue("", port))
			u := startTLSProto(t, h, false)
			tr := newH3Transport(t, func(tr *Transport) {
				tr.MaxConnsPerHost = limit
				tr.h3.handshakeTimeout = 300 * time.Millisecond
			})
			s := startConnSampler(t, tr, portOf(t, u))
			if p, err := getProto(context.Background(), tr, u); err != nil || p != "HTTP/1.1" {
				t.Fatalf("first request: %s, %v", p, err)
			}
			s.sample() // its connection is idle in the pool
			// The Alt-Svc is known now: the next requests start the dial
			// (closing the idle TCP connection for its slot) and fall back.
			if got := burst(t, tr, u, 16); got["HTTP/1.1"] != 16 {
				t.Fatalf("burst: %v, want all over HTTP/1.1", got)
			}
			eventually(t, "the alternative marked broken", func() bool { return brokenAlt(t, tr, u, port) })
			if got := burst(t, tr, u, 32); got["HTTP/1.1"] != 32 {
				t.Fatalf("burst after the failure: %v", got)
			}
			s.check(t, limit)
			if n := tr.h3.quic.held.Load(); n != 0 {
				t.Fatalf("QUIC still holds %d slots after its dial failed", n)
			}
		})
	}
}

// h3Holder is a server whose /hold requests wait until released, and a
// Transport with MaxConnsPerHost 1 already on HTTP/3.
type h3Holder struct {
	u       string
	tr      *Transport
	release chan struct{}
	held    chan string // the protocol of each /hold request that arrived
	s       *connSampler
}

func newH3Holder(t *testing.T) *h3Holder {
	hh := &h3Holder{release: make(chan struct{}), held: make(chan string, 16)}
	h := &protoHandler{extra: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/hold" {
			return false
		}
		hh.held <- r.Proto
		select {
		case <-hh.release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, r.Proto)
		return true
	}}
	hh.u = startWrapped(t, h)
	hh.tr = newH3Transport(t, func(tr *Transport) { tr.MaxConnsPerHost = 1 })
	hh.s = startConnSampler(t, hh.tr, portOf(t, hh.u))
	if _, err := getProto(context.Background(), hh.tr, hh.u); err != nil {
		t.Fatal(err)
	}
	hh.s.sample() // its connection is idle in the pool
	awaitHTTP3(t, hh.tr, hh.u)
	return hh
}

// forgetAlternative makes later requests go over TCP (as when the Alt-Svc
// entry expired or was cleared) while the QUIC connection stays.
func (hh *h3Holder) forgetAlternative(t *testing.T) {
	advertise(t, hh.tr.altSvcCache(), hh.u, "clear")
}

// TestMaxConnsTCPRequestClosesIdleQUIC: with a limit of 1 and an idle
// QUIC connection holding the only slot, a request that goes over TCP
// closes it and goes ahead instead of waiting for ever.
func TestMaxConnsTCPRequestClosesIdleQUIC(t *testing.T) {
	hh := newH3Holder(t)
	s := hh.s
	hh.forgetAlternative(t)
	p, err := getProto(context.Background(), hh.tr, hh.u)
	if err != nil || !isTCPProto(p) {
		t.Fatalf("request after the alternative went: %s, %v; want TCP", p, err)
	}
	s.check(t, 1)
}

// TestMaxConnsTCPWaitersAfterBusyQUIC: the only slot is a QUIC
// connection busy with a request; TCP requests queue, some are cancelled
// while they wait and return their context's error, and when the QUIC
// request ends the connection gives its slot up: the others succeed over
// TCP, one connection at a time.
func TestMaxConnsTCPWaitersAfterBusyQUIC(t *testing.T) {
	hh := newH3Holder(t)
	s := hh.s
	holdDone := make(chan error, 1)
	go func() {
		p, err := getProto(context.Background(), hh.tr, hh.u+"/hold")
		if err == nil && p != "HTTP/3.0" {
			err = fmt.Errorf("held request over %s", p)
		}
		holdDone <- err
	}()
	if p := <-hh.held; p != "HTTP/3.0" {
		t.Fatalf("held request arrived over %s", p)
	}
	hh.forgetAlternative(t)
	const n = 8
	ctxs := make([]context.CancelFunc, n)
	results := make(chan error, n)
	req, err := http.NewRequest("GET", hh.u, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := hh.tr.connKeyFor(req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		go func() {
			p, err := getProto(ctx, hh.tr, hh.u)
			if err == nil && !isTCPProto(p) {
				err = fmt.Errorf("waiter over %s", p)
			}
			results <- err
		}()
	}
	eventually(t, "the TCP requests queued", func() bool { return hh.tr.pool.Waiting(key) == n })
	for i := 0; i < n; i += 2 {
		ctxs[i]()
	}
	cancelled := 0
	for range n / 2 {
		if err := <-results; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v, want context.Canceled", err)
		}
		cancelled++
	}
	close(hh.release)
	if err := <-holdDone; err != nil {
		t.Fatal(err)
	}
	for range n - cancelled {
		if err := <-results; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	}
	for _, c := range ctxs {
		c()
	}
	s.check(t, 1)
	if w := hh.tr.pool.Waiting(key); w != 0 {
		t.Fatalf("%d waiters left", w)
	}
}

// TestMaxConnsBurstWaitsForQUICDial: with a limit of 1, a burst arrives
// once the origin's alternative is known and its TCP connection idle; one
// request closes the TCP connection for the QUIC dial's slot, and the
// others, their head start spent at once, wait for the dial rather than
// queueing for TCP behind it (where the new QUIC connection would be
// closed again to serve them): every request goes over HTTP/3, on one QUIC
// connection.
func TestMaxConnsBurstWaitsForQUICDial(t *testing.T) {
	h := &protoHandler{}
	u := startWrapped(t, h)
	tr := newH3Transport(t, func(tr *Transport) {
		tr.MaxConnsPerHost = 1
		tr.h3.headStart = time.Nanosecond
	})
	s := startConnSampler(t, tr, portOf(t, u))
	if p, err := getProto(context.Background(), tr, u); err != nil || !isTCPProto(p) {
		t.Fatalf("first request: %s, %v; want TCP", p, err)
	}
	s.sample() // its connection is idle in the pool
	if got := burst(t, tr, u, 16); got["HTTP/3.0"] != 16 {
		t.Fatalf("burst: %v, want all 16 over HTTP/3", got)
	}
	if n := len(h.h3Remotes()); n != 1 {
		t.Fatalf("%d QUIC connections served the burst, want 1", n)
	}
	s.check(t, 1)
}

// TestMaxConnsMixedProtocolsStress: bursts of 48 requests while the
// origin's alternative is forgotten again and again (each TCP response
// advertises it anew), so requests that go over TCP and requests that go
// over HTTP/3 wait for slots held by connections of the other protocol at
// once. Every request succeeds (no lost wake-up, no deadlock) and the
// limit holds throughout.
func TestMaxConnsMixedProtocolsStress(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(fmt.Sprintf("limit%d", limit), func(t *testing.T) {
			h := &protoHandler{}
			u := startWrapped(t, h)
			tr := newH3Transport(t, func(tr *Transport) { tr.MaxConnsPerHost = limit })
			s := startConnSampler(t, tr, portOf(t, u))
			if _, err := getProto(context.Background(), tr, u); err != nil {
				t.Fatal(err)
			}
			s.sample() // its connection is idle in the pool
			total := map[string]int{}
			for range 4 {
				stop := make(chan struct{})
				flipped := make(chan struct{})
				go func() {
					defer close(flipped)
					for {
						select {
						case <-stop:
							return
						case <-time.After(500 * time.Microsecond):
						}
						advertise(t, tr.altSvcCache(), u, "clear")
					}
				}()
				got := burst(t, tr, u, 48)
				close(stop)
				<-flipped
				for p, n := range got {
					total[p] += n
				}
			}
			s.check(t, limit)
			t.Logf("protocols over the bursts: %v", total)
		})
	}
}

// awaitHTTP3 sends GETs to u until one goes over HTTP/3 (the Alt-Svc
// learned, the QUIC dial done); a failed GET fails the test.
func awaitHTTP3(t *testing.T, tr *Transport, u string) {
	t.Helper()
	eventually(t, "a request over HTTP/3", func() bool {
		p, err := getProto(context.Background(), tr, u)
		if err != nil {
			t.Fatal(err)
		}
		return p == "HTTP/3.0"
	})
}

// connKeyOf is the TCP connection key tr files a GET of u under.
func connKeyOf(t *testing.T, tr *Transport, u string) connKey {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := tr.connKeyFor(req)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
