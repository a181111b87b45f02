package h2conn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// Frame-level tests of the connection against testpeer's hostile
// server: each error path the peer can take, and the bounds on what a
// hostile peer can make the client do.

// hostileConn starts an H2Hostile server running serve on each connection
// and a connection to it.
func hostileConn(t *testing.T, cfg Config, script testpeer.H2HostileScript) (*Conn, *testpeer.H2Hostile) {
	c, s, _ := recordedHostileConn(t, cfg, script)
	return c, s
}

// recordingConn keeps a copy of every byte the client wrote.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex // guards out
	out bytes.Buffer
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.out.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// sentFrames names the frames the client wrote (as testpeer's Count does).
func (r *recordingConn) sentFrames(t *testing.T) map[string]int {
	t.Helper()
	r.mu.Lock()
	b := bytes.Clone(r.out.Bytes())
	r.mu.Unlock()
	b = bytes.TrimPrefix(b, []byte(http2.ClientPreface))
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	counts := map[string]int{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return counts
		}
		name := f.Header().Type.String()
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			name += " " + f.ErrCode.String()
		case *http2.RSTStreamFrame:
			name += " " + f.ErrCode.String()
		}
		counts[name]++
	}
}

// recordedHostileConn is hostileConn with the client's bytes recorded:
// what the client sent just before it closed may never reach the server.
func recordedHostileConn(t *testing.T, cfg Config, script testpeer.H2HostileScript) (*Conn, *testpeer.H2Hostile, *recordingConn) {
	t.Helper()
	s := testpeer.StartH2Hostile(t, script)
	raw, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	nc := &recordingConn{Conn: raw}
	c, err := NewClientConn(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, s, nc
}

// getWithin sends a GET on c and fails the test if it takes longer than a
// generous hang guard.
func getWithin(t *testing.T, c *Conn, path string) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://frames.test"+path, nil)
	resp, err := c.RoundTrip(req)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GET %s hung", path)
	}
	return resp, err
}

// TestFramesConnectionErrors: frames that are connection errors fail
// the request in flight, send GOAWAY with the code, and leave the
// connection unusable.
func TestFramesConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(p *testpeer.H2Peer, id uint32)
		code string
	}{
		{"push-promise", func(p *testpeer.H2Peer, id uint32) {
			p.Write(func(fr *http2.Framer) error {
				return fr.WritePushPromise(http2.PushPromiseParam{StreamID: id, PromiseID: 2, BlockFragment: testpeer.HeaderBlock(":method", "GET"), EndHeaders: true})
			})
		}, "GOAWAY PROTOCOL_ERROR"},
		{"data-beyond-stream-window", func(p *testpeer.H2Peer, id uint32) {
			p.Headers(id, false, ":status", "200")
			chunk := make([]byte, 16<<10)
			for range 5 { // 80 KiB against a 64 KiB stream window
				p.Data(id, false, chunk)
			}
		}, "GOAWAY FLOW_CONTROL_ERROR"},
		{"data-on-idle-stream", func(p *testpeer.H2Peer, id uint32) {
			p.Data(id+4, false, []byte("x"))
		}, "GOAWAY PROTOCOL_ERROR"},
		{"connection-window-overflow", func(p *testpeer.H2Peer, id uint32) {
			p.Write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1<<31-1) })
		}, "GOAWAY FLOW_CONTROL_ERROR"},
		{"endless-continuation", func(p *testpeer.H2Peer, id uint32) {
			p.Write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: testpeer.HeaderBlock(":status", "200")})
			})
			big := testpeer.HeaderBlock("x-big", strings.Repeat("a", 15000))
			for range 200 { // 3 MB of headers against a 64 KiB limit
				if p.Write(func(fr *http2.Framer) error { return fr.WriteContinuation(id, false, big) }) != nil {
					return
				}
			}
		}, "GOAWAY PROTOCOL_ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, rec := recordedHostileConn(t, Config{
				MaxResponseHeaderBytes: 64 << 10,
				HTTP2:                  &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10},
			}, testpeer.H2HostileScript{Serve: func(p *testpeer.H2Peer) {
				id, ok := p.NextStream(5 * time.Second)
				if !ok {
					return
				}
				tc.act(p, id)
				<-p.Closed()
			}})
			resp, err := getWithin(t, c, "/")
			// The body is not read before the connection fails: reading
			// would give window back.
			waitFor(t, "the connection to become unusable", func() bool { return !c.Usable() })
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Fatal("request succeeded on a connection the server broke")
			}
			waitFor(t, "the client's "+tc.code, func() bool { return rec.sentFrames(t)[tc.code] == 1 })
		})
	}
}

// TestFramesResetOneOfMany: RST_STREAM on one of several streams fails
// that request only.
func TestFramesResetOneOfMany(t *testing.T) {
	c, _ := hostileConn(t, Config{}, testpeer.H2HostileScript{Serve: func(p *testpeer.H2Peer) {
		ids, ok := p.NextStreams(3, 5*time.Second)
		if !ok {
			return
		}
		for _, id := range ids {
			if id == 3 {
				p.Write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeInternal) })
				continue
			}
			p.OK(id, "ok")
		}
		<-p.Closed()
	}})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		if !c.ReserveStream() {
			t.Fatal("no stream")
		}
		wg.Add(1)
		ready := make(chan struct{})
		go func() {
			defer wg.Done()
			close(ready)
			resp, err := getWithin(t, c, "/")
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			errs[i] = err
		}()
		<-ready
		time.Sleep(20 * time.Millisecond) // streams 1, 3, 5 in order
	}
	wg.Wait()
	var se http2.StreamError
	if errs[0] != nil || errs[2] != nil || !errors.As(errs[1], &se) || se.Code != http2.ErrCodeInternal {
		t.Fatalf("errors %v, want only the second to be an INTERNAL_ERROR reset", errs)
	}
	if !c.Usable() {
		t.Fatal("a stream reset cost the connection")
	}
}

// TestFramesPingAndSettingsFlood: every PING and SETTINGS of a flood is
// answered, the request in the middle of it is answered too, and nothing
// queues (the answers are written as the frames are read).
func TestFramesPingAndSettingsFlood(t *testing.T) {
	const flood = 2000
	counted := make(chan struct{})
	c, _ := hostileConn(t, Config{}, testpeer.H2HostileScript{Serve: func(p *testpeer.H2Peer) {
		defer close(counted)
		id, ok := p.NextStream(5 * time.Second)
		if !ok {
			return
		}
		for i := range flood {
			p.Write(func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{byte(i), byte(i >> 8)}) })
			p.Write(func(fr *http2.Framer) error { return fr.WriteSettings() })
		}
		p.OK(id, "after the flood")
		if !p.WaitCount("PING+ACK", flood, 10*time.Second) || !p.WaitCount("SETTINGS+ACK", flood, 10*time.Second) {
			t.Errorf("not every flood frame answered: %v", p.Counts())
		}
	}})
	resp, err := getWithin(t, c, "/")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "after the flood" {
		t.Fatalf("body %q", got)
	}
	<-counted // the client stays open until the server counted
}

// TestFramesGoAwayMidFlight: GOAWAY naming stream 3 while streams 1,
// 3 and 5 are in flight: 1 and 3 are answered, 5 fails retryable (not
// processed), and the connection takes no new stream.
func TestFramesGoAwayMidFlight(t *testing.T) {
	c, _ := hostileConn(t, Config{}, testpeer.H2HostileScript{Serve: func(p *testpeer.H2Peer) {
		if _, ok := p.NextStreams(3, 5*time.Second); !ok {
			return
		}
		p.Write(func(fr *http2.Framer) error { return fr.WriteGoAway(3, http2.ErrCodeNo, nil) })
		p.OK(1, "one")
		p.OK(3, "three")
		<-p.Closed()
	}})
	results := make([]chan roundTripResult, 3)
	for i := range 3 {
		if !c.ReserveStream() {
			t.Fatal("no stream")
		}
		results[i] = make(chan roundTripResult, 1)
		go func() {
			resp, err := getWithin(t, c, "/")
			results[i] <- roundTripResult{resp, err}
		}()
		time.Sleep(20 * time.Millisecond)
	}
	for i, want := range []string{"one", "three"} {
		r := <-results[i]
		if r.err != nil {
			t.Fatalf("stream %d: %v", 2*i+1, r.err)
		}
		if got := readAll(t, r.resp); got != want {
			t.Fatalf("stream %d: %q", 2*i+1, got)
		}
	}
	r := <-results[2]
	var np *NotProcessedError
	if !errors.As(r.err, &np) || np.Reason != ReasonGoAway {
		t.Fatalf("stream 5: %v, want ReasonGoAway", r.err)
	}
	if c.Usable() || c.ReserveStream() {
		t.Fatal("connection still takes streams after GOAWAY")
	}
}

// TestFramesServerClosesMidFrame: the server cuts the connection in the
// middle of a DATA frame: the body read fails (unexpected EOF, or the
// reset the close becomes when the client had unread bytes), nothing hangs.
func TestFramesServerClosesMidFrame(t *testing.T) {
	c, _ := hostileConn(t, Config{}, testpeer.H2HostileScript{Serve: func(p *testpeer.H2Peer) {
		id, ok := p.NextStream(5 * time.Second)
		if !ok {
			return
		}
		p.Headers(id, false, ":status", "200")
		// A DATA frame header announcing 100 bytes, then 10 of them.
		hdr := []byte{0, 0, 100, 0, 0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
		p.WriteRaw(append(hdr, bytes.Repeat([]byte("x"), 10)...))
	}})
	resp, err := getWithin(t, c, "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ne net.Error
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &ne) {
		t.Fatalf("body read: %v, want unexpected EOF or a connection reset", err)
	}
}

// TestFramesStrayFramesBounded: a server that keeps sending frames for
// a stream the client reset is given up once past the allowance
// (ENHANCE_YOUR_CALM), rather than spinning the client's reader forever.
func TestFramesStrayFramesBounded(t *testing.T) {
	c, _, rec := recordedHostileConn(t, Config{}, testpeer.H2HostileScript{Serve: func(p *testpeer.H2Peer) {
		id, ok := p.NextStream(5 * time.Second)
		if !ok {
			return
		}
		p.Write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) })
		for range strayAllowance + 100 {
			if p.Write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }) != nil {
				break
			}
		}
		<-p.Closed()
	}})
	if _, err := getWithin(t, c, "/"); err == nil {
		t.Fatal("a reset request succeeded")
	}
	waitFor(t, "the connection to give up on the peer", func() bool { return !c.Usable() })
	waitFor(t, "GOAWAY ENHANCE_YOUR_CALM", func() bool { return rec.sentFrames(t)["GOAWAY ENHANCE_YOUR_CALM"] == 1 })
}
