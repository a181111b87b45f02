package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h3conn"
	"github.com/quic-go/quic-go/http3"
)

// HTTP/3 whose UDP path dies in the middle of requests: the QUIC server's
// socket is closed under 20 requests in flight, so nothing (no
// CONNECTION_CLOSE) reaches the client. Each request must end with its
// context's error soon after its deadline, or before it with
// h3conn.ErrPathDead when some of its frames went unacknowledged (the
// socket closed before the server acknowledged them) and the connection
// was judged dead; CloseIdleConnections must leave no goroutine or socket
// of HTTP/3 behind.

func TestH3UDPDiesMidRequest(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) { stressH3DeadPath(t, false) })
}

// TestH3DeadPathNextRequest: after the UDP path died, a request
// with a 2 s deadline gets through: the origin's TCP server works. The
// cancelled requests' STOP_SENDING frames and the next request's HEADERS go
// unacknowledged, h3conn judges the path dead (4 PTOs, at least 1 s), the
// connection leaves the pool, the alternative is marked broken, and the
// next request, a GET that got no answer, is sent again over TCP. Before,
// the dead connection took every request of the origin until QUIC's idle
// timeout (30 s). net/http has no HTTP/3; its HTTP/2 over a silently dead
// TCP path keeps the connection unless HTTP2Config.ReadIdleTimeout is set.
func TestH3DeadPathNextRequest(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) { stressH3DeadPath(t, true) })
}

// stressH3DeadPath runs the scenario; checkNext asserts that the request
// after the path died succeeds (else it is logged).
func stressH3DeadPath(t *testing.T, checkNext bool) {
	{
		const n = 20
		release := make(chan struct{})
		var arrived atomic.Int32
		h := stressHoldHandler(release, &arrived)
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h3srv := &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(h3Cert(t).ServerConfig())}
		served := make(chan struct{})
		go func() { h3srv.Serve(pc); close(served) }()
		t.Cleanup(func() { close(release); h3srv.Close(); pc.Close(); <-served })
		h.setAltSvc(altValue("", pc.LocalAddr().(*net.UDPAddr).Port))
		u := startTLSProto(t, h, true)
		tr := newH3Transport(t, nil)
		fetch(t, tr, "GET", u, nil)
		eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })

		var wg sync.WaitGroup
		var bodyStarted, judgedDead, overTCP atomic.Int32
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", u+"/hold", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					if resp.Proto != "HTTP/3.0" {
						overTCP.Add(1)
						t.Errorf("request %d went over %s", i, resp.Proto)
					}
					buf := make([]byte, 7)
					if _, err = io.ReadFull(resp.Body, buf); err == nil {
						bodyStarted.Add(1)
						_, err = io.ReadAll(resp.Body)
					}
					resp.Body.Close()
				}
				dl, _ := ctx.Deadline()
				switch {
				case errors.Is(err, context.DeadlineExceeded):
				case errors.Is(err, h3conn.ErrPathDead):
					// The request's own frames (or their ACKs) were lost
					// with the path: the judgement came before its deadline.
					judgedDead.Add(1)
				default:
					t.Errorf("request %d: %v (%T), want context.DeadlineExceeded or h3conn.ErrPathDead", i, err, err)
				}
				if late := time.Since(dl); late > 5*time.Second {
					t.Errorf("request %d returned %v after its deadline", i, late)
				}
			}(i)
		}
		// The path dies once every request reads its body over HTTP/3. (Had
		// it died when the handlers ran, a response head still on its way
		// would be lost, and its GET, never answered, sent again over TCP
		// once the connection was judged dead: TestH3DeadPathLaterRequestsUseTCP.)
		eventually(t, "the requests reading their bodies", func() bool { return bodyStarted.Load() == n || overTCP.Load() > 0 })
		pc.Close() // the path dies: nothing more reaches the client
		wg.Wait()
		t.Logf("%d of %d requests ended before their deadline because the path was judged dead", judgedDead.Load(), n)
		if arrived.Load() != n {
			t.Errorf("%d requests reached the handler, want %d", arrived.Load(), n)
		}

		// The next request: asserted by TestH3DeadPathNextRequest.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err == nil {
			io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Logf("next request: %s after %v", resp.Proto, time.Since(start))
		} else {
			t.Logf("next request: %v after %v", err, time.Since(start))
			if checkNext {
				t.Errorf("the request after the UDP path died failed: %v", err)
			}
		}
		tr.CloseIdleConnections()
		stressPoolEmpty(t, tr)
	}
}

// TestH3ServerClosesMidRequest: the HTTP/3 server closes (its
// connections get CONNECTION_CLOSE) while 20 responses are streaming.
// Every body read must fail at once (not at the context's deadline), and
// the next request must succeed (over TCP, or a new QUIC connection).
func TestH3ServerClosesMidRequest(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		const n = 20
		release := make(chan struct{})
		var arrived atomic.Int32
		h := stressHoldHandler(release, &arrived)
		port, h3srv := startH3(t, h, nil)
		t.Cleanup(func() { close(release) })
		h.setAltSvc(altValue("", port))
		u := startTLS(t, h)
		tr := newH3Transport(t, nil)
		fetch(t, tr, "GET", u, nil)
		eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })

		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", u+"/hold", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					if resp.Proto != "HTTP/3.0" {
						t.Errorf("request %d went over %s", i, resp.Proto)
					}
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				errs[i] = err
			}(i)
		}
		eventually(t, "the requests at the server", func() bool { return arrived.Load() == n })
		h3srv.Close()
		wg.Wait()
		texts := map[string]int{}
		for i, err := range errs {
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("request %d: %v, want the connection's close", i, err)
				continue
			}
			texts[normalizeErr(err)]++
		}
		t.Logf("%v", texts)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("the request after the server closed: %v", err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("next request: %s", resp.Proto)
		tr.CloseIdleConnections()
		stressPoolEmpty(t, tr)
	})
}

// TestH3HeaderTimeoutUnderLoad: ResponseHeaderTimeout over HTTP/3 with 20
// requests whose answers never come: each ends with net/http's "timeout
// awaiting response headers" (a net.Error with Timeout), soon after the
// timeout, and the connection then serves a request.
func TestH3HeaderTimeoutUnderLoad(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		const n = 20
		release := make(chan struct{})
		u := startWrapped(t, stormHandler(release))
		t.Cleanup(func() { close(release) })
		tr := newH3Transport(t, func(tr *Transport) { tr.ResponseHeaderTimeout = 200 * time.Millisecond })
		stressFinalGet(t, tr, u+"/fast")
		eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
		if p := stressFinalGet(t, tr, u+"/fast"); p != "HTTP/3.0" {
			t.Fatalf("spoke %s", p)
		}
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				start := time.Now()
				err, _ := stressGetAll(tr, u+"/head", 20*time.Second)
				var ne net.Error
				if err == nil || err.Error() != "net/http: timeout awaiting response headers" || !errors.As(err, &ne) || !ne.Timeout() {
					t.Errorf("request %d: %v (%T), want net/http's response header timeout", i, err, err)
				}
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("request %d took %v", i, took)
				}
			}(i)
		}
		wg.Wait()
		if p := stressFinalGet(t, tr, u+"/fast"); p != "HTTP/3.0" {
			t.Errorf("after the timeouts: %s", p)
		}
		tr.CloseIdleConnections()
		stressPoolEmpty(t, tr)
	})
}

// stressHoldHandler answers /hold with a 200 and a flushed "partial", counts
// the request in arrived, and holds the body open until release closes or
// the request ends; other paths get protoHandler's answers.
func stressHoldHandler(release <-chan struct{}, arrived *atomic.Int32) *protoHandler {
	return &protoHandler{extra: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/hold" {
			return false
		}
		arrived.Add(1)
		w.WriteHeader(200)
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	}}
}
