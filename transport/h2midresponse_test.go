package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// HTTP/2 streams that go wrong in the middle of a response, under
// concurrency: the server resets every other stream after part of its
// body (RST_STREAM INTERNAL_ERROR), and, on a real server, responses that
// never come with ResponseHeaderTimeout while requests queue for streams
// under MaxConnsPerHost. The errors must be net/http's, the connection
// must keep serving the other streams, and no request may hang.

// stressResetOddScript answers every stream with a head and 3 bytes of
// body; even streams (in arrival order) then get the rest and END_STREAM,
// odd ones RST_STREAM INTERNAL_ERROR.
func stressResetOddScript(conn, stream int, fr *http2.Framer, id uint32) error {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	if err := fr.WriteData(id, false, []byte("par")); err != nil {
		return err
	}
	if stream%2 == 1 {
		return fr.WriteRSTStream(id, http2.ErrCodeInternal)
	}
	return fr.WriteData(id, true, []byte("tial"))
}

func TestH2ResetMidBody(t *testing.T) {
	const n = 40
	var got [2][]string
	for i, side := range []string{"nethttp", "ferry"} {
		stressLeakCheck(t, func(t *testing.T) {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: stressResetOddScript})
			std := &http.Transport{Protocols: protocolsOf("h2c")}
			var rt http.RoundTripper = std
			var tr *Transport
			if side == "ferry" {
				tr = From(std)
				rt = tr
			}
			defer closeIdle(rt)
			res := make([]string, n)
			var wg sync.WaitGroup
			for j := 0; j < n; j++ {
				wg.Add(1)
				go func(j int) {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
					defer cancel()
					resp, err := rt.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
					if err != nil {
						res[j] = "roundtrip: " + normalizeErr(err)
						return
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					res[j] = string(b)
					if err != nil {
						res[j] += " / " + normalizeErr(err)
					}
				}(j)
			}
			wg.Wait()
			sort.Strings(res)
			got[i] = res
			if conns, _ := s.Counts(); conns != 1 {
				stressSideErrorf(t, side)("%s: %d connections, want the resets to leave the one connection in use", side, conns)
			}
			if tr != nil {
				stressPoolEmpty(t, tr)
			}
		})
	}
	if !equalStrings(got[0], got[1]) {
		t.Errorf("differs\nnet/http: %q\nferry:    %q", got[0], got[1])
	}
	t.Logf("ferry: %q", got[1][0])
	t.Logf("ferry: %q", got[1][n-1])
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestH2HeaderTimeoutWhileQueued: a server allowing 4 streams that never
// answers /hang, ResponseHeaderTimeout 200 ms, MaxConnsPerHost 1 and 24
// concurrent requests: each times out in its turn (the streams of
// timed-out requests free for the queued ones), all within a bounded
// time, and the connection then serves /ok.
func TestH2HeaderTimeoutWhileQueued(t *testing.T) {
	const n = 24
	for _, side := range []string{"nethttp", "ferry"} {
		t.Run(side, func(t *testing.T) {
			stressLeakCheck(t, func(t *testing.T) {
				release := make(chan struct{})
				hs := startStressH2(t, release, func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/hang" {
						select {
						case <-r.Context().Done():
						case <-release:
						}
						return
					}
					io.WriteString(w, "ok")
				}, &http.HTTP2Config{MaxConcurrentStreams: 4})
				rt, tr := stressH2Client(t, side, &http.Transport{MaxConnsPerHost: 1, ResponseHeaderTimeout: 200 * time.Millisecond})
				defer closeIdle(rt)
				stressFinalGet(t, rt, hs.URL+"/ok")
				start := time.Now()
				errs := make([]error, n)
				ends := make([]time.Duration, n)
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						errs[i], _ = stressGetAll(rt, hs.URL+"/hang", 30*time.Second)
						ends[i] = time.Since(start).Round(time.Millisecond)
					}(i)
				}
				wg.Wait()
				sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
				t.Logf("%s: requests ended at %v", side, ends)
				took := time.Since(start)
				errorf := stressSideErrorf(t, side)
				classes := map[string]int{}
				for i, err := range errs {
					cl := stressErrClass(err)
					classes[cl]++
					if err == nil || err.Error() != "http2: timeout awaiting response headers" {
						errorf("request %d: %v, want x/net's response header timeout", i, err)
					}
				}
				// 24 requests, 4 streams, 200 ms each: 6 turns, about 1.2 s.
				if took > 15*time.Second {
					errorf("the queue took %v", took)
				}
				t.Logf("%s: %v in %v", side, classes, took)
				stressFinalGet(t, rt, hs.URL+"/ok")
				if tr != nil {
					stressPoolEmpty(t, tr)
				}
			})
		})
	}
}

// TestH2WaitersWokenForEveryFreedStream: MaxConnsPerHost 1, a
// server allowing 4 streams that never answers, 4 requests in flight and 4
// more queued in the pool for a stream. The 4 in flight are cancelled at
// once: their 4 streams free, so the 4 queued requests must all reach the
// server. (x/net counts a reset stream until the server acknowledges the
// PING sent after the RST_STREAM, so these releases go through
// h2conn's lag watcher.)
func TestH2WaitersWokenForEveryFreedStream(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) { stressWaitersWoken(t) })
}

func stressWaitersWoken(t *testing.T) {
	const streams = 4
	release := make(chan struct{})
	var arrived sync.WaitGroup
	var mu sync.Mutex // guards arrivals
	arrivals := 0
	hs := startStressH2(t, release, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			mu.Lock()
			arrivals++
			mu.Unlock()
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		io.WriteString(w, "ok")
	}, &http.HTTP2Config{MaxConcurrentStreams: streams})
	_, tr := stressH2Client(t, "ferry", &http.Transport{MaxConnsPerHost: 1})
	defer tr.CloseIdleConnections()
	stressFinalGet(t, tr, hs.URL+"/ok")
	count := func() int { mu.Lock(); defer mu.Unlock(); return arrivals }

	start := func(n int) []context.CancelFunc {
		var cancels []context.CancelFunc
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			arrived.Add(1)
			go func() {
				defer arrived.Done()
				req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/hang", nil)
				if resp, err := tr.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}()
		}
		return cancels
	}
	first := start(streams)
	eventually(t, "the first requests at the server", func() bool { return count() == streams })
	second := start(streams)
	eventually(t, "the next requests queued", func() bool { return tr.Stats().Pool.Waits >= streams })
	for _, c := range first {
		c()
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() < 2*streams && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := count() - streams; got != streams {
		t.Errorf("%d of the %d queued requests reached the server after %d streams freed", got, streams, streams)
	}
	for _, c := range second {
		c()
	}
	arrived.Wait()
}

// stressGoAwayErrorScript answers the first stream of the first connection,
// then the next held streams with a head and part of a body, then sends GOAWAY
// PROTOCOL_ERROR naming the last of them and closes the connection: every
// body in progress is cut. Later connections answer at once.
func stressGoAwayErrorScript(held int) func(conn, stream int, fr *http2.Framer, id uint32) error {
	var ids []uint32 // only the first connection's read loop touches it
	return func(conn, stream int, fr *http2.Framer, id uint32) error {
		if conn != 0 || stream == 0 { // stream 0: the warm-up request
			return testpeer.H2OK(fr, id)
		}
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		if err := fr.WriteData(id, false, []byte("par")); err != nil {
			return err
		}
		ids = append(ids, id)
		if len(ids) < held {
			return nil
		}
		fr.WriteGoAway(id, http2.ErrCodeProtocol, []byte("test"))
		return io.EOF // ends the connection
	}
}

// TestH2GoAwayErrorMidBody: 10 responses are streaming when the
// server sends GOAWAY PROTOCOL_ERROR and closes: every body read fails
// (none is retried: their heads had arrived), with net/http's errors, and
// the next requests get a new connection.
func TestH2GoAwayErrorMidBody(t *testing.T) {
	const held = 10
	var got [2][]string
	for i, side := range []string{"nethttp", "ferry"} {
		stressLeakCheck(t, func(t *testing.T) {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: stressGoAwayErrorScript(held)})
			std := &http.Transport{Protocols: protocolsOf("h2c")}
			var rt http.RoundTripper = std
			var tr *Transport
			if side == "ferry" {
				tr = From(std)
				rt = tr
			}
			defer closeIdle(rt)
			u := "http://" + s.Addr() + "/"
			// One connection first, so that the held streams share it.
			stressFinalGetBody(t, rt, u, "ok")
			res := make([]string, held)
			var wg sync.WaitGroup
			for j := 0; j < held; j++ {
				wg.Add(1)
				go func(j int) {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
					defer cancel()
					resp, err := rt.RoundTrip(newReq(t, "GET", u, nil).WithContext(ctx))
					if err != nil {
						res[j] = "roundtrip: " + normalizeErr(err)
						return
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					res[j] = string(b) + " / " + stressErrClass(err)
				}(j)
			}
			wg.Wait()
			sort.Strings(res)
			got[i] = res
			for _, r := range res {
				if r == "par / ok" || r == "ok / ok" {
					t.Errorf("%s: a response cut by GOAWAY PROTOCOL_ERROR read as complete: %q", side, r)
				}
			}
			stressFinalGetBody(t, rt, u, "ok")
			if tr != nil {
				stressPoolEmpty(t, tr)
			}
		})
	}
	if !equalStrings(got[0], got[1]) {
		t.Errorf("differs\nnet/http: %q\nferry:    %q", got[0], got[1])
	}
	t.Logf("ferry: %q", got[1])
}

// stressFinalGetBody is stressFinalGet for a server whose body is want.
func stressFinalGetBody(t *testing.T, rt http.RoundTripper, u, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	resp, err := rt.RoundTrip(newReq(t, "GET", u, nil).WithContext(ctx))
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != want {
		t.Fatalf("GET: %q %v, want %q", b, err, want)
	}
}

// TestH2CancelledWaiterPassesWake: one stream (the server's limit)
// under MaxConnsPerHost 1, request A holding it, B and C queued in that
// order. B is cancelled, then A's stream frees (A answered, or A cancelled:
// its reset goes through h2conn's lag watcher). The wake-up meant for the
// first in line must reach C, which was left alone in the queue.
func TestH2CancelledWaiterPassesWake(t *testing.T) {
	for _, how := range []string{"answered", "cancelled"} {
		t.Run(how, func(t *testing.T) {
			stressLeakCheck(t, func(t *testing.T) { stressCancelledWaiter(t, how) })
		})
	}
}

func stressCancelledWaiter(t *testing.T, how string) {
	release := make(chan struct{})
	answerA := make(chan struct{})
	var mu sync.Mutex // guards seen
	seen := map[string]bool{}
	hs := startStressH2(t, release, func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		mu.Lock()
		seen[id] = true
		mu.Unlock()
		var until <-chan struct{}
		if id == "A" {
			until = answerA
		}
		if id != "" {
			select {
			case <-r.Context().Done():
				return
			case <-release:
				return
			case <-until:
			}
		}
		io.WriteString(w, "ok")
	}, &http.HTTP2Config{MaxConcurrentStreams: 1})
	_, tr := stressH2Client(t, "ferry", &http.Transport{MaxConnsPerHost: 1})
	defer tr.CloseIdleConnections()
	stressFinalGet(t, tr, hs.URL+"/")
	has := func(id string) bool { mu.Lock(); defer mu.Unlock(); return seen[id] }

	var wg sync.WaitGroup
	results := map[string]chan error{}
	send := func(id string, ctx context.Context) {
		ch := make(chan error, 1)
		results[id] = ch
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/?id="+id, nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			ch <- err
		}()
	}
	guard, cancelAll := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancelAll()
	ctxA, cancelA := context.WithCancel(guard)
	ctxB, cancelB := context.WithCancel(guard)
	send("A", ctxA)
	eventually(t, "A at the server", func() bool { return has("A") })
	waits := tr.Stats().Pool.Waits
	send("B", ctxB)
	eventually(t, "B queued", func() bool { return tr.Stats().Pool.Waits >= waits+1 })
	send("C", guard)
	eventually(t, "C queued", func() bool { return tr.Stats().Pool.Waits >= waits+2 })
	cancelB()
	if err := <-results["B"]; !errors.Is(err, context.Canceled) {
		t.Errorf("B: %v, want context.Canceled", err)
	}
	if how == "answered" {
		close(answerA)
		if err := <-results["A"]; err != nil {
			t.Errorf("A: %v", err)
		}
	} else {
		cancelA()
		<-results["A"]
	}
	select {
	case err := <-results["C"]:
		t.Errorf("C ended before reaching the server: %v", err)
	case <-func() chan struct{} {
		ch := make(chan struct{})
		go func() {
			defer close(ch)
			deadline := time.Now().Add(10 * time.Second)
			for !has("C") && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
		}()
		return ch
	}():
		if !has("C") {
			t.Errorf("C never reached the server after A's stream freed (B, ahead of it, was cancelled)")
		}
	}
	cancelAll()
	wg.Wait()
	cancelA()
}
