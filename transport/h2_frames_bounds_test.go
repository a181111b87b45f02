package transport

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// Frame-level HTTP/2 scenarios about bounds: the connection's receive
// window, and floods of frames that carry nothing (empty DATA,
// WINDOW_UPDATE, empty CONTINUATION). Harness in h2_frames_test.go.

// TestH2FramesConnDataBeyondWindow: with HTTP2Config's receive buffers
// at their smallest (65,535 bytes per stream and per connection), four
// requests in flight whose caller reads no body; the server sends one
// byte more than the connection window the client granted (65,535 plus
// its WINDOW_UPDATEs on stream 0), spread over the streams so that none
// exceeds its own window. The client must refuse the excess as a
// connection error (FLOW_CONTROL_ERROR, RFC 9113 6.9.1): it closes the
// connection, a body read fails, and the bodies hold no more than the
// connection window.
func TestH2FramesConnDataBeyondWindow(t *testing.T) {
	const streams = 4
	mk := func(std *http.Transport) {
		std.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 65535, MaxReceiveBufferPerConnection: 65535}
	}
	h2FrameRun(t, mk, func(t *testing.T, side string, rt http.RoundTripper) {
		seen := make(chan uint32, streams)
		type overrun struct{ sent, window int64 }
		sent := make(chan overrun, 1)
		peers := &h2FramePeers{}
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			Serve: func(p *testpeer.H2Peer) {
				peers.add(p)
				var ids []uint32
				for len(ids) < streams {
					id, ok := p.NextStream(h2FrameHang)
					if !ok {
						sent <- overrun{}
						return
					}
					ids = append(ids, id)
					seen <- id
					h2Headers200(p, id)
				}
				perStream := int64(65535)
				if v, ok := p.ClientSetting(http2.SettingInitialWindowSize); ok {
					perStream = int64(v)
				}
				window := p.ConnWindow()
				chunk := make([]byte, 16384)
				var n int64
				left := window + 1
			send:
				for _, id := range ids {
					for k := min(left, perStream); k > 0; {
						m := min(k, int64(len(chunk)))
						if p.Data(id, false, chunk[:m]) != nil {
							break send
						}
						k, left, n = k-m, left-m, n+m
					}
				}
				sent <- overrun{n, window}
				<-p.Closed()
			},
		})
		u := "http://" + s.Addr() + "/"
		ctx, cancel := context.WithTimeout(context.Background(), h2FrameHang)
		defer cancel()
		resps := make(chan *http.Response, streams)
		for i := 0; i < streams; i++ {
			go func() {
				req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
				}
				resps <- resp
			}()
			select {
			case <-seen:
			case <-time.After(h2FrameHang):
				t.Fatalf("the server never read request %d", i)
			}
		}
		var got []*http.Response
		for i := 0; i < streams; i++ {
			if r := <-resps; r != nil {
				got = append(got, r)
				defer r.Body.Close()
			}
		}
		o := <-sent
		if o.sent <= o.window {
			t.Fatalf("the server sent %d bytes, not beyond the %d-byte connection window", o.sent, o.window)
		}
		p := peers.get(0)
		select {
		case <-p.Closed():
		case <-time.After(h2FrameHang):
			t.Fatalf("the client kept the connection after %d bytes on a %d-byte connection window: %s", o.sent, o.window, peers.counts())
		}
		failed, total := 0, 0
		for _, r := range got {
			k, err := readBounded(r.Body)
			total += k
			if err != nil {
				failed++
			}
		}
		if failed == 0 {
			t.Errorf("every body read to its end (%d bytes) after the connection window was overrun", total)
		}
		if int64(total) > o.window {
			t.Errorf("bodies read %d bytes, beyond the %d-byte connection window", total, o.window)
		}
		t.Logf("%s: window %d, server sent %d; bodies read %d bytes, %d of %d failed; client frames: %s",
			side, o.window, o.sent, total, failed, len(got), peers.counts())
	})
}

// TestH2FramesEmptyDataFlood: 20000 empty DATA frames on the response's
// stream before its body: the answer arrives intact, memory bounded.
func TestH2FramesEmptyDataFlood(t *testing.T) {
	h2FrameFlood(t, 20000, "", func(fr *http2.Framer, id uint32, i int) error {
		return fr.WriteData(id, false, nil)
	})
}

// TestH2FramesWindowUpdateFlood: 20000 WINDOW_UPDATE frames of one byte
// on the connection and on the stream (the windows stay far below
// 2^31-1): the answer arrives, memory bounded.
func TestH2FramesWindowUpdateFlood(t *testing.T) {
	h2FrameFlood(t, 20000, "", func(fr *http2.Framer, id uint32, i int) error {
		if i%2 == 0 {
			id = 0
		}
		return fr.WriteWindowUpdate(id, 1)
	})
}

// TestH2FramesEmptyContinuationFlood: a HEADERS frame without
// END_HEADERS, then empty CONTINUATION frames, never ending the block:
// the header list limit is never reached, so only a cap on the frames of
// one block stops it (CVE-2023-45288 for servers). The request must end
// with an error, the heap stay bounded, and the client close the
// connection once the request is over.
//
// net/http's client does not cap the frames: it reads what the server
// writes (tens of thousands of frames a second) until the request's
// deadline, so its request has one of 1 s. ferry's has none: it must stop
// the flood itself (a connection error once a block takes more frames
// than the largest allowed block needs), not end at the hang guard's
// deadline.
func TestH2FramesEmptyContinuationFlood(t *testing.T) {
	const frames = 200000
	var written atomic.Int64
	h2FrameRun(t, nil, func(t *testing.T, side string, rt http.RoundTripper) {
		written.Store(0)
		done := make(chan struct{})
		peer := make(chan *testpeer.H2Peer, 1)
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			Serve: func(p *testpeer.H2Peer) {
				defer close(done)
				peer <- p
				id, ok := p.NextStream(h2FrameHang)
				if !ok {
					return
				}
				block := testpeer.HeaderBlock(":status", "200")
				p.Write(func(fr *http2.Framer) error {
					return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block})
				})
				for i := 0; i < frames; i++ {
					if p.Write(func(fr *http2.Framer) error { return fr.WriteContinuation(id, false, nil) }) != nil {
						break
					}
					written.Add(1)
				}
				<-p.Closed()
			},
		})
		stop := resourcePeak()
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if side == "nethttp" {
			ctx, cancel = context.WithTimeout(ctx, time.Second)
		}
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.Addr()+"/", nil)
		o := h2FrameDo(rt, req)
		use := stop()
		if o.err == nil {
			t.Errorf("got %v during an endless header block, want an error", o)
		}
		if side == "ferry" && (errors.Is(o.err, context.DeadlineExceeded) || o.err == errH2FrameHung) {
			t.Errorf("got %v: the flood ran until the hang guard, want the client to stop it", o)
		}
		if o.elapsed > 5*time.Second {
			t.Errorf("returned after %v, want within the 1 s deadline (net/http) or the frame cap (ferry)", o.elapsed)
		}
		if use.heap > 64<<20 || use.retained > 8<<20 {
			t.Errorf("heap +%d KiB at peak, +%d KiB retained during an endless header block", use.heap>>10, use.retained>>10)
		}
		atReturn := written.Load()
		// The request ended inside a header block: the connection's
		// decoder state is lost, so the client must close it (both do).
		kept := "closed it"
		select {
		case <-(<-peer).Closed():
		case <-time.After(time.Second):
			kept = "kept it open"
			t.Errorf("the connection still open a second after its request ended mid header block")
		}
		t.Logf("%s: %v after %v; %d of %d empty CONTINUATION frames written by then; a second later the client %s (%d written); heap peak +%d KiB",
			side, o, o.elapsed.Round(time.Millisecond), atReturn, frames, kept, written.Load(), use.heap>>10)
		s.Close()
		<-done
	})
}

// TestH2FramesPaddingRefunded: padding counts against flow control, but
// the client never hands it to the caller, so it must give it back at
// once (RFC 9113 6.1). With 65,535-byte receive buffers, the server sends
// 300 DATA frames of one byte and 255 bytes of padding (77,100
// flow-controlled bytes, beyond both windows) while the caller reads
// nothing, never exceeding the windows the client granted: it can finish
// only if the client returns the padding without waiting for reads.
func TestH2FramesPaddingRefunded(t *testing.T) {
	const frames, pad = 300, 255
	mk := func(std *http.Transport) {
		std.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 65535, MaxReceiveBufferPerConnection: 65535}
	}
	h2FrameRun(t, mk, func(t *testing.T, side string, rt http.RoundTripper) {
		sent := make(chan int, 1)
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			Serve: func(p *testpeer.H2Peer) {
				id, ok := p.NextStream(h2FrameHang)
				if !ok {
					sent <- 0
					return
				}
				streamWindow := int64(65535)
				if v, ok := p.ClientSetting(http2.SettingInitialWindowSize); ok {
					streamWindow = int64(v)
				}
				h2Headers200(p, id)
				padding := make([]byte, pad)
				const cost = 1 + 1 + pad // pad length byte, data, padding
				var used int64
				i := 0
				for deadline := time.Now().Add(h2FrameHang); i < frames && time.Now().Before(deadline); {
					if used+cost > streamWindow+p.WindowUpdates(id) || used+cost > p.ConnWindow() {
						time.Sleep(time.Millisecond) // wait for the client's WINDOW_UPDATEs
						continue
					}
					if p.Write(func(fr *http2.Framer) error { return fr.WriteDataPadded(id, false, []byte("x"), padding) }) != nil {
						break
					}
					used += cost
					i++
				}
				sent <- i
				if i == frames {
					p.Data(id, true, nil)
				}
				<-p.Closed()
			},
		})
		req := newReq(t, "GET", "http://"+s.Addr()+"/", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*h2FrameHang)
		defer cancel()
		resp, err := rt.RoundTrip(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n := <-sent
		if n < frames {
			t.Fatalf("the server could send %d of %d padded frames within the windows: the client did not return the padding", n, frames)
		}
		got, err := readBounded(resp.Body)
		if err != nil || got != frames {
			t.Errorf("body: %d bytes, %v; want %d bytes", got, err, frames)
		}
		t.Logf("%s: %d padded frames within the windows; body %d bytes", side, n, got)
	})
}

// TestH2FramesInformationalFlood: 103 responses without end, and the
// caller has no Got1xxResponse hook (which would make the count its
// business): the client must stop them at its header limit with an
// error, not read them forever. Both clients count the 1xx header bytes
// against MaxResponseHeaderBytes (16 KiB here).
func TestH2FramesInformationalFlood(t *testing.T) {
	const most = 100000
	mk := func(std *http.Transport) { std.MaxResponseHeaderBytes = 16 << 10 }
	h2FrameRun(t, mk, func(t *testing.T, side string, rt http.RoundTripper) {
		var written atomic.Int64
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			Serve: func(p *testpeer.H2Peer) {
				id, ok := p.NextStream(h2FrameHang)
				if !ok {
					return
				}
				for i := 0; i < most; i++ {
					if p.Headers(id, false, ":status", "103", "link", "</style.css>; rel=preload") != nil {
						break
					}
					written.Add(1)
				}
				<-p.Closed()
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), h2FrameHang)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.Addr()+"/", nil)
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		elapsed := time.Since(start)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got %d after %d informational responses, want an error", resp.StatusCode, written.Load())
		}
		if elapsed >= h2FrameHang || ctx.Err() != nil {
			t.Errorf("ended by the deadline after %v (%d informational responses written): %v", elapsed, written.Load(), err)
		}
		t.Logf("%s: %v after %v, %d informational responses written by then", side, err, elapsed.Round(time.Millisecond), written.Load())
	})
}
