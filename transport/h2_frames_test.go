package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// HTTP/2 behaviour pinned frame by frame, through the public Transport
// only, so that the same tests hold for the client connection ferry has
// today (x/net's ClientConn behind internal/h2conn) and for the one that
// replaces it. Each scenario runs on net/http's Transport and on ferry's
// (h2c with prior knowledge, against testpeer's hostile server) and
// asserts what a caller sees: status and body, or an error and the part of
// its text callers test; that no request outlives a generous bound (no
// hang); that no goroutine or descriptor is left (stressLeakCheck); and,
// for floods, that the heap stays under a generous bound. Where net/http
// and ferry differ today the expectation is per side, with a comment.

// h2FrameHang bounds every request: a request still running after it is
// a hang, whatever the scenario.
const h2FrameHang = 10 * time.Second

// h2FrameSides are the two clients every scenario runs on.
var h2FrameSides = []string{"nethttp", "ferry"}

// h2FrameClient builds the side's client for h2c with prior knowledge,
// after mk adjusted net/http's Transport (ferry's is built from it).
func h2FrameClient(side string, mk func(*http.Transport)) (http.RoundTripper, *Transport) {
	std := &http.Transport{Protocols: protocolsOf("h2c")}
	if mk != nil {
		mk(std)
	}
	if side == "ferry" {
		tr := From(std)
		return tr, tr
	}
	return std, nil
}

// h2FrameRun runs body for each side under stressLeakCheck (servers started
// in body are closed before the leak check), then checks ferry's pool is
// empty after CloseIdleConnections.
func h2FrameRun(t *testing.T, mk func(*http.Transport), body func(t *testing.T, side string, rt http.RoundTripper)) {
	for _, side := range h2FrameSides {
		t.Run(side, func(t *testing.T) {
			stressLeakCheck(t, func(t *testing.T) {
				rt, tr := h2FrameClient(side, mk)
				defer closeIdle(rt)
				body(t, side, rt)
				if tr != nil {
					stressPoolEmpty(t, tr)
				}
			})
		})
	}
}

// h2FrameOutcome is what a caller sees of one request.
type h2FrameOutcome struct {
	status  int
	body    string
	err     error // from RoundTrip
	bodyErr error // from reading the body
	trailer http.Header
	got1xx  []int
	elapsed time.Duration
}

// String is the outcome as the tests match it: "200 \"ok\"", with
// " body error: ..." when reading the body failed, or "error: ...".
func (o h2FrameOutcome) String() string {
	if o.err != nil {
		return "error: " + o.err.Error()
	}
	s := fmt.Sprintf("%d %q", o.status, o.body)
	if o.bodyErr != nil {
		s += " body error: " + o.bodyErr.Error()
	}
	return s
}

// errH2FrameHung is the outcome of a request that ignored its context:
// still running well after h2FrameHang (a client deadlocked on a lock
// does not see its context end).
var errH2FrameHung = errors.New("request still running after its context ended (a hang)")

// h2FrameDo sends req through rt, reads the whole body and returns what
// the caller saw, bounded by h2FrameHang (through the request's context)
// and, for a client that ignores the context, by a watchdog: then the
// outcome is errH2FrameHung and the request's goroutine is left behind
// (the leak check reports it too).
func h2FrameDo(rt http.RoundTripper, req *http.Request) h2FrameOutcome {
	done := make(chan h2FrameOutcome, 1)
	go func() { done <- h2FrameDoWait(rt, req) }()
	select {
	case o := <-done:
		return o
	case <-time.After(h2FrameHang + 5*time.Second):
		return h2FrameOutcome{err: errH2FrameHung, elapsed: h2FrameHang + 5*time.Second}
	}
}

func h2FrameDoWait(rt http.RoundTripper, req *http.Request) h2FrameOutcome {
	var o h2FrameOutcome
	var mu sync.Mutex // guards o.got1xx (the hook runs on the client's goroutine)
	ctx, cancel := context.WithTimeout(req.Context(), h2FrameHang)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			mu.Lock()
			o.got1xx = append(o.got1xx, code)
			mu.Unlock()
			return nil
		},
	})
	start := time.Now()
	resp, err := rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		o.err = err
	} else {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		o.status, o.body, o.bodyErr, o.trailer = resp.StatusCode, string(b), err, resp.Trailer
	}
	o.elapsed = time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	return o
}

// h2FrameGet is h2FrameDo with a GET of u.
func h2FrameGet(t *testing.T, rt http.RoundTripper, u string) h2FrameOutcome {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h2FrameDo(rt, req)
}

// check fails t unless the outcome contains want and ended in time.
func (o h2FrameOutcome) check(t *testing.T, what, want string) {
	t.Helper()
	if o.elapsed >= h2FrameHang {
		t.Errorf("%s: still running after %v (a hang): %v", what, o.elapsed, o)
		return
	}
	if !strings.Contains(o.String(), want) {
		t.Errorf("%s: got %v, want it to contain %q", what, o, want)
	}
}

// h2FramePeers collects the hostile server's connections for a test to
// inspect after the requests.
type h2FramePeers struct {
	mu    sync.Mutex // guards peers
	peers []*testpeer.H2Peer
}

func (ps *h2FramePeers) add(p *testpeer.H2Peer) {
	ps.mu.Lock()
	ps.peers = append(ps.peers, p)
	ps.mu.Unlock()
}

func (ps *h2FramePeers) get(n int) *testpeer.H2Peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if n < len(ps.peers) {
		return ps.peers[n]
	}
	return nil
}

// served counts the connections that carried requests (HEADERS), and
// the requests on connections other than the first.
func (ps *h2FramePeers) served() (conns, later int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.peers {
		if n := p.Count("HEADERS"); n > 0 {
			conns++
			if p.N > 0 {
				later += n
			}
		}
	}
	return conns, later
}

// checkConns checks that want connections served the requests; ferry
// must also have dialed no other (net/http's h2c with prior knowledge may
// dial a spare connection it closes unused: see countServedNoSpare).
func (ps *h2FramePeers) checkConns(t *testing.T, side string, s *testpeer.H2Hostile, want int) {
	t.Helper()
	if got, _ := ps.served(); got != want {
		t.Errorf("%d connections served requests, want %d", got, want)
	}
	if got := s.Conns(); side == "ferry" && got != want {
		t.Errorf("ferry dialed %d connections, want %d", got, want)
	}
}

// counts renders every connection's frame counts, for logs.
func (ps *h2FramePeers) counts() string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var parts []string
	for _, p := range ps.peers {
		m := p.Counts()
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, fmt.Sprintf("%s=%d", k, m[k]))
		}
		parts = append(parts, fmt.Sprintf("conn %d: %s", p.N, strings.Join(kv, " ")))
	}
	return strings.Join(parts, "; ")
}

// h2FrameAct is what the server does to the first request of its first
// connection; it reports whether the connection goes on answering
// (every later request with 200 "ok"). When it does not, the server
// keeps the connection open until the client closes it.
type h2FrameAct func(p *testpeer.H2Peer, id uint32) (keepServing bool)

// startH2FrameServer starts a hostile server whose first connection's
// first request gets act and every other request 200 "ok".
func startH2FrameServer(t *testing.T, settings []http2.Setting, noSettings bool, act h2FrameAct) (*testpeer.H2Hostile, *h2FramePeers) {
	peers := &h2FramePeers{}
	s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
		Settings:   settings,
		NoSettings: noSettings,
		Serve: func(p *testpeer.H2Peer) {
			peers.add(p)
			for k := 0; ; k++ {
				id, ok := p.NextStream(h2FrameHang)
				if !ok {
					<-p.Closed()
					return
				}
				if p.N == 0 && k == 0 {
					if !act(p, id) {
						<-p.Closed()
						return
					}
					continue
				}
				if p.OK(id, "ok") != nil {
					return
				}
			}
		},
	})
	return s, peers
}

// h2FrameViolation is a scenario of one request that meets a server's
// act, then a second request that shows whether and how the Transport
// recovered (a connection error needs a new connection, a stream error
// does not).
type h2FrameViolation struct {
	name       string
	settings   []http2.Setting
	noSettings bool
	mk         func(*http.Transport)
	act        h2FrameAct
	// want is what the first request's outcome contains, per side when
	// the sides differ (wantFerry overrides for ferry).
	want, wantFerry string
	// conns is how many connections the two requests used.
	conns int
	// check, when set, inspects the first outcome further.
	check func(t *testing.T, side string, o h2FrameOutcome, peers *h2FramePeers)
	// skip, when set, names why a side cannot run the scenario (a known
	// defect of that side on this toolchain), or returns "".
	skip func(side string) string
}

func (c h2FrameViolation) run(t *testing.T) {
	h2FrameRun(t, c.mk, func(t *testing.T, side string, rt http.RoundTripper) {
		if c.skip != nil {
			if why := c.skip(side); why != "" {
				t.Skip(why)
			}
		}
		s, peers := startH2FrameServer(t, c.settings, c.noSettings, c.act)
		u := "http://" + s.Addr() + "/"
		first := h2FrameGet(t, rt, u)
		want := c.want
		if side == "ferry" && c.wantFerry != "" {
			want = c.wantFerry
		}
		first.check(t, "first request", want)
		if c.check != nil {
			c.check(t, side, first, peers)
		}
		second := h2FrameGet(t, rt, u)
		second.check(t, "next request", `200 "ok"`)
		peers.checkConns(t, side, s, c.conns)
		t.Logf("%s: first: %v; next: %v; client frames: %s", side, first, second, peers.counts())
	})
}

// h2Headers200 writes the response HEADERS of stream id (status 200).
func h2Headers200(p *testpeer.H2Peer, id uint32) bool {
	return p.Headers(id, false, ":status", "200") == nil
}

// TestH2FramesDataOnStreamZero: DATA on stream 0 is a connection error
// (PROTOCOL_ERROR, RFC 9113 6.1); the request fails, the next one gets a
// new connection.
func TestH2FramesDataOnStreamZero(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Data(0, false, []byte("x"))
			return false
		},
		want:  "PROTOCOL_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesHeadersOnEvenStream: HEADERS on stream 2, which the client
// never opened and the server may not open (push is off). RFC 9113 5.1
// makes it a connection error, but net/http's client (and x/net's)
// ignores HEADERS for a stream it does not know, taking it for one it
// cancelled: the request in flight gets its answer on the same
// connection. Pinned as net/http does it.
func TestH2FramesHeadersOnEvenStream(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Headers(2, true, ":status", "200")
			return p.OK(id, "late") == nil
		},
		want:  `200 "late"`,
		conns: 1,
	}.run(t)
}

// TestH2FramesDataOnIdleStream: DATA on a stream the client has not
// opened yet (idle, RFC 9113 5.1) is a connection error.
func TestH2FramesDataOnIdleStream(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Data(id+4, false, []byte("x"))
			return p.OK(id, "late") == nil
		},
		want:  "PROTOCOL_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesStreamWindowOverflow: a WINDOW_UPDATE taking the stream's
// send window past 2^31-1 is a stream error (FLOW_CONTROL_ERROR): the
// request fails with it, the client resets the stream, and the connection
// goes on serving.
func TestH2FramesStreamWindowOverflow(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(id, 1<<31-1) })
			return true
		},
		want:  "FLOW_CONTROL_ERROR",
		conns: 1,
		skip: func(side string) string {
			if side == "nethttp" && !netHTTP127 {
				// Go 1.26's bundled client resets the stream while holding
				// its connection mutex and takes it again (processWindowUpdate
				// -> endStreamError -> abortStream): the connection deadlocks
				// and the request never returns. x/net (ferry on 1.26) and
				// Go 1.27 take the lock once.
				return "known net/http 1.26 defect: a stream WINDOW_UPDATE overflow deadlocks the client connection"
			}
			return ""
		},
		check: func(t *testing.T, side string, o h2FrameOutcome, peers *h2FramePeers) {
			if p := peers.get(0); !p.WaitCount("RST_STREAM FLOW_CONTROL_ERROR", 1, h2FrameHang) {
				t.Errorf("the client did not reset the stream: %s", peers.counts())
			}
		},
	}.run(t)
}

// TestH2FramesConnWindowOverflow: a WINDOW_UPDATE taking the connection's
// send window past 2^31-1 is a connection error (FLOW_CONTROL_ERROR).
func TestH2FramesConnWindowOverflow(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1<<31-1) })
			return true
		},
		want:  "FLOW_CONTROL_ERROR",
		conns: 2,
	}.run(t)
}

// h2FrameHeaderPad is one header field of n bytes' value, in a block of
// its own (a fresh encoder), so that blocks can follow one another.
func h2FrameHeaderPad(n int) []byte {
	return testpeer.HeaderBlock("x-pad", strings.Repeat("a", n))
}

// TestH2FramesEndlessContinuation: HEADERS without END_HEADERS followed
// by CONTINUATION frames that never end it. The client must stop at its
// header list limit with an error, not read (or keep) the block forever;
// the heap stays bounded while the server keeps writing.
func TestH2FramesEndlessContinuation(t *testing.T) {
	const limit = 64 << 10
	const most = 256 << 20 // what the server writes at most
	var allocated func() uint64
	var written atomic.Int64
	h2FrameViolation{
		mk: func(std *http.Transport) {
			std.MaxResponseHeaderBytes = limit
			allocated = totalAllocSince()
		},
		act: func(p *testpeer.H2Peer, id uint32) bool {
			block := testpeer.HeaderBlock(":status", "200")
			p.Write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block})
			})
			pad := h2FrameHeaderPad(16000)
			for i := 0; i < most/len(pad); i++ {
				if p.Write(func(fr *http2.Framer) error { return fr.WriteContinuation(id, false, pad) }) != nil {
					break
				}
				written.Add(int64(len(pad)))
			}
			return false
		},
		want:  "error: ",
		conns: 2,
		check: func(t *testing.T, side string, o h2FrameOutcome, peers *h2FramePeers) {
			all := allocated()
			// The server's writes end when the client closes the
			// connection; wait for that before reading the count.
			<-peers.get(0).Closed()
			if n := written.Load(); n >= most/2 {
				t.Errorf("the client read %d MiB of one header block (limit %d KiB)", n>>20, limit>>10)
			}
			if all > 64<<20 {
				t.Errorf("%d MiB allocated during an endless header block (limit %d KiB)", all>>20, limit>>10)
			}
			t.Logf("%s: server wrote %d KiB of CONTINUATION; %d KiB allocated meanwhile", side, written.Load()>>10, all>>10)
		},
	}.run(t)
}

// totalAllocSince returns a function reporting the bytes allocated by the
// whole process since the call (garbage included: an upper bound on what
// a client held).
func totalAllocSince() func() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.TotalAlloc
	return func() uint64 {
		runtime.ReadMemStats(&ms)
		return ms.TotalAlloc - base
	}
}

// TestH2FramesHeaderListTooLarge: a response header block (HEADERS and
// CONTINUATION frames, END_HEADERS set) whose one field is four times
// MaxResponseHeaderBytes. Both clients' hpack decoders refuse a string
// longer than the limit, a connection error (COMPRESSION_ERROR): the
// request fails, the next one gets a new connection.
func TestH2FramesHeaderListTooLarge(t *testing.T) {
	const limit = 16 << 10
	h2FrameViolation{
		mk: func(std *http.Transport) { std.MaxResponseHeaderBytes = limit },
		act: func(p *testpeer.H2Peer, id uint32) bool {
			block := append(testpeer.HeaderBlock(":status", "200"), h2FrameHeaderPad(4*limit)...)
			p.Write(func(fr *http2.Framer) error { return writeFragmentedHeaders(fr, id, block) })
			return true
		},
		want:  "connection error: COMPRESSION_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesHeaderListOverLimit: a response header block of many small
// fields (each well under the limit) adding up to four times
// MaxResponseHeaderBytes, in HEADERS and CONTINUATION frames. Both
// clients' frame readers stop at a block larger than the limit allows
// and fail the connection (PROTOCOL_ERROR): the request fails, the next
// one gets a new connection. (On Go 1.26 net/http also sends GOAWAY and
// RST_STREAM before closing; ferry closes without them. Not seen by
// callers, so not asserted.)
func TestH2FramesHeaderListOverLimit(t *testing.T) {
	const limit = 16 << 10
	h2FrameViolation{
		mk: func(std *http.Transport) { std.MaxResponseHeaderBytes = limit },
		act: func(p *testpeer.H2Peer, id uint32) bool {
			kv := []string{":status", "200"}
			for i := 0; i < 4*limit/1000; i++ {
				kv = append(kv, fmt.Sprintf("x-field-%d", i), strings.Repeat("v", 1000))
			}
			block := testpeer.HeaderBlock(kv...)
			p.Write(func(fr *http2.Framer) error { return writeFragmentedHeaders(fr, id, block) })
			return true
		},
		want:  "connection error: PROTOCOL_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesResponseWithoutSettings: a server that never sends its
// SETTINGS but answers. RFC 9113 3.4 makes SETTINGS the server's first
// frame, but net/http's client (and x/net's) does not enforce it: the
// answer is taken and the connection serves on with the default
// settings. Pinned as net/http does it.
func TestH2FramesResponseWithoutSettings(t *testing.T) {
	h2FrameViolation{
		noSettings: true,
		act: func(p *testpeer.H2Peer, id uint32) bool {
			return p.OK(id, "no settings") == nil
		},
		want:  `200 "no settings"`,
		conns: 1,
	}.run(t)
}

// TestH2FramesSettingsNeverArrive: a server that never sends SETTINGS nor
// anything else: the request ends with its context's deadline, not later.
// (Concurrent requests on such a server: TestChaos10H2SettingsNeverCome.)
func TestH2FramesSettingsNeverArrive(t *testing.T) {
	h2FrameRun(t, nil, func(t *testing.T, side string, rt http.RoundTripper) {
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			NoSettings: true,
			Serve:      func(p *testpeer.H2Peer) { <-p.Closed() },
		})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.Addr()+"/", nil)
		o := h2FrameDo(rt, req)
		if !errors.Is(o.err, context.DeadlineExceeded) {
			t.Errorf("got %v, want context.DeadlineExceeded", o)
		}
		if o.elapsed > 5*time.Second {
			t.Errorf("returned after %v, its deadline was 300ms", o.elapsed)
		}
	})
}

// TestH2FramesPushPromise: the client sends SETTINGS_ENABLE_PUSH=0, so a
// PUSH_PROMISE is a connection error (PROTOCOL_ERROR), as in net/http.
func TestH2FramesPushPromise(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			block := testpeer.HeaderBlock(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/pushed")
			p.Write(func(fr *http2.Framer) error {
				return fr.WritePushPromise(http2.PushPromiseParam{StreamID: id, PromiseID: 2, BlockFragment: block, EndHeaders: true})
			})
			return p.OK(id, "late") == nil
		},
		want:  "PROTOCOL_ERROR",
		conns: 2,
		check: func(t *testing.T, side string, o h2FrameOutcome, peers *h2FramePeers) {
			if v, ok := peers.get(0).ClientSetting(http2.SettingEnablePush); !ok || v != 0 {
				t.Errorf("client's SETTINGS_ENABLE_PUSH = %d (sent: %v), want 0 sent", v, ok)
			}
		},
	}.run(t)
}

// TestH2FramesResetOnStream: RST_STREAM (INTERNAL_ERROR) before the
// response fails that request with the code; the connection goes on.
func TestH2FramesResetOnStream(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeInternal) })
			return true
		},
		want:  "INTERNAL_ERROR",
		conns: 1,
	}.run(t)
}

// TestH2FramesRefusedStreamRetried: REFUSED_STREAM means the server did
// not process the request: a GET is retried on the same connection and
// the caller sees only the answer.
func TestH2FramesRefusedStreamRetried(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
			return true
		},
		want:  `200 "ok"`,
		conns: 1,
		check: func(t *testing.T, side string, o h2FrameOutcome, peers *h2FramePeers) {
			if n := peers.get(0).Count("HEADERS"); n != 2 {
				t.Errorf("%d requests HEADERS on the connection, want 2 (one retry)", n)
			}
		},
	}.run(t)
}

// h2FrameHalfClose sends the server's FIN after b: the client reads b and
// then EOF, never a reset (the server still reads what the client sends).
func h2FrameHalfClose(p *testpeer.H2Peer, b []byte) {
	p.WriteRaw(b)
	p.Conn.(*net.TCPConn).CloseWrite()
}

// TestH2FramesServerClosesMidHeaders: the connection ends in the middle of
// a frame header, before any response: the request fails with an error
// and does not hang.
func TestH2FramesServerClosesMidHeaders(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			// 5 of the 9 bytes of a HEADERS frame header.
			h2FrameHalfClose(p, []byte{0, 0, 10, byte(http2.FrameHeaders), 4})
			return false
		},
		want:  "error: ",
		conns: 2,
	}.run(t)
}

// TestH2FramesServerClosesMidData: the connection ends inside a DATA
// frame's payload after the response headers: the body read fails (not
// a short body read as complete) and does not hang.
func TestH2FramesServerClosesMidData(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			h2Headers200(p, id)
			// A DATA frame header announcing 100 bytes, then 10 of them.
			frame := []byte{0, 0, 100, byte(http2.FrameData), 0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
			h2FrameHalfClose(p, append(frame, "0123456789"...))
			return false
		},
		want:  "body error: ",
		conns: 2,
	}.run(t)
}

// TestH2FramesInformationalThenFinal: a 103 response, then the final
// 200: the caller gets the final response, and Got1xxResponse saw 103.
func TestH2FramesInformationalThenFinal(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Headers(id, false, ":status", "103", "link", "</style.css>; rel=preload")
			return p.OK(id, "final") == nil
		},
		want:  `200 "final"`,
		conns: 1,
		check: func(t *testing.T, side string, o h2FrameOutcome, peers *h2FramePeers) {
			if len(o.got1xx) != 1 || o.got1xx[0] != 103 {
				t.Errorf("Got1xxResponse saw %v, want [103]", o.got1xx)
			}
		},
	}.run(t)
}

// TestH2FramesTrailers: trailers in a HEADERS frame ending the stream
// after the body: declared and undeclared fields both reach
// Response.Trailer once the body is read.
func TestH2FramesTrailers(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Headers(id, false, ":status", "200", "trailer", "x-declared")
			p.Data(id, false, []byte("body"))
			return p.Headers(id, true, "x-declared", "d", "x-undeclared", "u") == nil
		},
		want:  `200 "body"`,
		conns: 1,
		check: func(t *testing.T, side string, o h2FrameOutcome, peers *h2FramePeers) {
			got := fmt.Sprint(o.trailer)
			if want := "map[X-Declared:[d] X-Undeclared:[u]]"; got != want {
				t.Errorf("Trailer = %s, want %s", got, want)
			}
		},
	}.run(t)
}

// writeFragmentedHeaders writes block (longer than one fragment) as a
// HEADERS frame ending the stream and CONTINUATION frames of at most 16,000
// bytes each (under the default max frame size), the last ending the
// header block.
func writeFragmentedHeaders(fr *http2.Framer, id uint32, block []byte) error {
	const frag = 16000
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:frag], EndStream: true}); err != nil {
		return err
	}
	for rest := block[frag:]; ; rest = rest[min(frag, len(rest)):] {
		if err := fr.WriteContinuation(id, len(rest) <= frag, rest[:min(frag, len(rest))]); err != nil || len(rest) <= frag {
			return err
		}
	}
}
