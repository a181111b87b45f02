package transport

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// Frame-level HTTP/2 scenarios with several requests or a flood (see
// h2_frames_test.go for the single-request ones and the harness).

// TestH2FramesDataBeyondWindow: the server sends one byte more than the
// stream window the client advertised while the caller reads nothing (so
// the client returned no window). The client must refuse the excess (a
// FLOW_CONTROL_ERROR: a stream reset, or the connection failed), the
// body read must fail,
// and the client must not have buffered beyond its window.
func TestH2FramesDataBeyondWindow(t *testing.T) {
	h2FrameRun(t, nil, func(t *testing.T, side string, rt http.RoundTripper) {
		peers := &h2FramePeers{}
		sent := make(chan int, 1)
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			Serve: func(p *testpeer.H2Peer) {
				peers.add(p)
				id, ok := p.NextStream(h2FrameHang)
				if !ok {
					return
				}
				window := uint32(65535)
				if v, ok := p.ClientSetting(http2.SettingInitialWindowSize); ok {
					window = v
				}
				h2Headers200(p, id)
				chunk := make([]byte, 16384)
				n := 0
				for left := int(window) + 1; left > 0; {
					k := min(left, len(chunk))
					if p.Data(id, false, chunk[:k]) != nil {
						break
					}
					left -= k
					n += k
				}
				sent <- n
				<-p.Closed()
			},
		})
		resp, err := rt.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var n int
		select {
		case n = <-sent:
		case <-time.After(h2FrameHang):
			t.Fatal("the server could not send the window and one byte")
		}
		p := peers.get(0)
		// The client may reset the stream, or fail the connection (today
		// both clients close it without a GOAWAY).
		refused := func() bool {
			select {
			case <-p.Closed():
				return true
			default:
			}
			return p.Count("RST_STREAM FLOW_CONTROL_ERROR")+p.Count("GOAWAY FLOW_CONTROL_ERROR") > 0
		}
		deadline := time.Now().Add(h2FrameHang)
		for !refused() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !refused() {
			t.Fatalf("the client accepted %d bytes on its window without FLOW_CONTROL_ERROR: %s", n, peers.counts())
		}
		got, err := readBounded(resp.Body)
		if err == nil {
			t.Errorf("body read %d bytes and no error after the window was overrun", got)
		}
		if got >= n {
			t.Errorf("body read %d bytes, all the server sent (%d) beyond the window", got, n)
		}
		t.Logf("%s: window overrun by 1 of %d bytes; body read %d then %v; client frames: %s", side, n, got, err, peers.counts())
	})
}

// readBounded reads r to its end or error, bounded by h2FrameHang.
func readBounded(r io.ReadCloser) (int, error) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := io.Copy(io.Discard, r)
		done <- result{int(n), err}
	}()
	select {
	case res := <-done:
		return res.n, res.err
	case <-time.After(h2FrameHang):
		r.Close()
		res := <-done
		return res.n, io.ErrNoProgress
	}
}

// h2FrameOrdered sends reqs one after another on rt, each once the server
// read the previous one's HEADERS (from seen), so that request i has the
// i-th stream of the connection; it returns every outcome.
func h2FrameOrdered(t *testing.T, rt http.RoundTripper, seen <-chan uint32, reqs []*http.Request) []h2FrameOutcome {
	out := make([]h2FrameOutcome, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = h2FrameDo(rt, req)
		}()
		select {
		case <-seen:
		case <-time.After(h2FrameHang):
			t.Errorf("the server never read request %d", i)
		}
	}
	wg.Wait()
	return out
}

// TestH2FramesGoAwayMidFlight: with four requests in flight on a warm
// connection, the server sends GOAWAY naming the second, answers the two
// at or below it, and leaves the connection open. Those two get their
// answers; the GET above the last stream id is retried once on a new
// connection; the POST above it whose body cannot be replayed (no
// GetBody) fails.
func TestH2FramesGoAwayMidFlight(t *testing.T) {
	h2FrameRun(t, nil, func(t *testing.T, side string, rt http.RoundTripper) {
		seen := make(chan uint32, 8)
		peers := &h2FramePeers{}
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			Serve: func(p *testpeer.H2Peer) {
				peers.add(p)
				if p.N != 0 {
					h2FrameAnswerRetried(p)
					return
				}
				ids, ok := h2FrameWarmThenStreams(p, 4, seen)
				if !ok {
					return
				}
				// The POST's body is on the wire (consumed, so it cannot be
				// replayed) before the GOAWAY: only the GETs can be retried.
				p.WaitCount("DATA", 1, h2FrameHang)
				p.Write(func(fr *http2.Framer) error { return fr.WriteGoAway(ids[1], http2.ErrCodeNo, nil) })
				p.OK(ids[0], "below")
				p.OK(ids[1], "last")
				<-p.Closed()
			},
		})
		u := "http://" + s.Addr() + "/"
		h2FrameGet(t, rt, u).check(t, "warm-up", `200 "warm"`)
		post := newReq(t, "POST", u, &streamBody{strings.NewReader("payload")})
		post.GetBody = nil
		out := h2FrameOrdered(t, rt, seen, []*http.Request{
			newReq(t, "GET", u, nil), newReq(t, "GET", u, nil), newReq(t, "GET", u, nil), post,
		})
		out[0].check(t, "stream below the last", `200 "below"`)
		out[1].check(t, "the last stream", `200 "last"`)
		out[2].check(t, "GET above the last", `200 "retried"`)
		out[3].check(t, "POST above the last, no GetBody", "error: ")
		peers.checkConns(t, side, s, 2)
		if _, later := peers.served(); later != 1 {
			t.Errorf("%d requests on later connections, want the GET retried once: %s", later, peers.counts())
		}
		t.Logf("%s: %v; client frames: %s", side, out, peers.counts())
	})
}

// TestH2FramesResetOneOfMany: three requests in flight; the server resets
// the middle one (CANCEL) and answers the others: only the reset request
// fails, the others get their own bodies, and the connection serves on.
func TestH2FramesResetOneOfMany(t *testing.T) {
	h2FrameRun(t, nil, func(t *testing.T, side string, rt http.RoundTripper) {
		seen := make(chan uint32, 8)
		peers := &h2FramePeers{}
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			Serve: func(p *testpeer.H2Peer) {
				peers.add(p)
				if p.N != 0 {
					return // a spare connection (net/http)
				}
				ids, ok := h2FrameWarmThenStreams(p, 3, seen)
				if !ok {
					return
				}
				p.Headers(ids[0], false, ":status", "200")
				p.Headers(ids[2], false, ":status", "200")
				p.Data(ids[0], false, []byte("fir"))
				p.Write(func(fr *http2.Framer) error { return fr.WriteRSTStream(ids[1], http2.ErrCodeCancel) })
				p.Data(ids[2], false, []byte("thi"))
				p.Data(ids[0], true, []byte("st"))
				p.Data(ids[2], true, []byte("rd"))
				for {
					id, ok := p.NextStream(h2FrameHang)
					if !ok || p.OK(id, "after") != nil {
						return
					}
				}
			},
		})
		u := "http://" + s.Addr() + "/"
		h2FrameGet(t, rt, u).check(t, "warm-up", `200 "warm"`)
		out := h2FrameOrdered(t, rt, seen, []*http.Request{
			newReq(t, "GET", u, nil), newReq(t, "GET", u, nil), newReq(t, "GET", u, nil),
		})
		out[0].check(t, "first", `200 "first"`)
		out[1].check(t, "reset", "CANCEL")
		out[2].check(t, "third", `200 "third"`)
		h2FrameGet(t, rt, u).check(t, "after", `200 "after"`)
		peers.checkConns(t, side, s, 1)
		t.Logf("%s: %v", side, out)
	})
}

// h2FrameFlood sends n frames (write, given the request's stream) after
// the request's response headers, then the body, and waits for n
// acknowledgements (ack; "" for frames that get none); it checks every
// flood frame was answered, the caller got its answer, and the heap and
// the goroutines stayed within a generous bound meanwhile.
func h2FrameFlood(t *testing.T, n int, ack string, write func(fr *http2.Framer, id uint32, i int) error) {
	h2FrameRun(t, nil, func(t *testing.T, side string, rt http.RoundTripper) {
		acked := make(chan bool, 1)
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			Serve: func(p *testpeer.H2Peer) {
				id, ok := p.NextStream(h2FrameHang)
				if !ok {
					return
				}
				base := p.Count(ack)
				h2Headers200(p, id)
				for i := 0; i < n; i++ {
					if p.Write(func(fr *http2.Framer) error { return write(fr, id, i) }) != nil {
						acked <- false
						return
					}
				}
				p.Data(id, true, []byte("ok"))
				acked <- ack == "" || p.WaitCount(ack, base+n, h2FrameHang)
				<-p.Closed()
			},
		})
		goroutines := runtime.NumGoroutine()
		stop := resourcePeak()
		o := h2FrameGet(t, rt, "http://"+s.Addr()+"/")
		all := <-acked
		use := stop()
		heap, retained := use.heap, use.retained
		o.check(t, "request", `200 "ok"`)
		if !all {
			t.Errorf("not all %d flood frames were acknowledged (%s)", n, ack)
		}
		if heap > 32<<20 || retained > 8<<20 {
			t.Errorf("heap +%d KiB at peak, +%d KiB retained during a flood of %d frames", heap>>10, retained>>10, n)
		}
		// The server's and the client's few goroutines per connection, the
		// sampler and the request's watchdog: a goroutine per frame (or per
		// acknowledgement) would be thousands.
		if extra := use.goroutines - goroutines; extra > 32 {
			t.Errorf("%d more goroutines at peak during a flood of %d frames", extra, n)
		}
		t.Logf("%s: %d frames, acknowledged: %v; heap peak +%d KiB, retained +%d KiB; goroutines peak +%d",
			side, n, all, heap>>10, retained>>10, use.goroutines-goroutines)
	})
}

// TestH2FramesPingFlood: 20000 PINGs between a response's headers and
// its body are each acknowledged, the response arrives, memory bounded.
func TestH2FramesPingFlood(t *testing.T) {
	h2FrameFlood(t, 20000, "PING+ACK", func(fr *http2.Framer, _ uint32, i int) error {
		return fr.WritePing(false, [8]byte{byte(i >> 8), byte(i), 'f', 'l', 'o', 'o', 'd', '!'})
	})
}

// TestH2FramesSettingsFlood: 20000 SETTINGS frames (the stream limit
// changing back and forth) are each acknowledged, the response arrives,
// memory bounded.
func TestH2FramesSettingsFlood(t *testing.T) {
	h2FrameFlood(t, 20000, "SETTINGS+ACK", func(fr *http2.Framer, _ uint32, i int) error {
		return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(100 + i%2)})
	})
}

// h2FrameWarmThenStreams answers the warm-up request on p, then collects
// the next n streams' ids, sending each to seen as it arrives (the test
// orders its requests by them). ok is false when the connection ended or
// a stream did not come within h2FrameHang.
func h2FrameWarmThenStreams(p *testpeer.H2Peer, n int, seen chan<- uint32) (ids []uint32, ok bool) {
	warm, ok := p.NextStream(h2FrameHang)
	if !ok || p.OK(warm, "warm") != nil {
		return nil, false
	}
	for len(ids) < n {
		id, ok := p.NextStream(h2FrameHang)
		if !ok {
			return ids, false
		}
		ids = append(ids, id)
		seen <- id
	}
	return ids, true
}
