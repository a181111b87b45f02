package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h3conn"
	"github.com/quic-go/quic-go/http3"
)

// An HTTP/3 connection whose UDP path dies silently: h3conn judges it dead
// once its packets go unacknowledged (internal/h3conn/pathwatch.go); the
// transport then takes it out of the pool, marks the alternative broken
// and sends the requests that were waiting on it over TCP when they are
// replayable. The path is killed by closing the HTTP/3 server's UDP
// socket: nothing, not even CONNECTION_CLOSE, reaches the client.

// deadPathEnv is an origin served over TCP and HTTP/3, and a Transport
// with an HTTP/3 connection to it that has answered a request.
type deadPathEnv struct {
	tr   *Transport
	u    string
	pc   net.PacketConn // the HTTP/3 server's socket: close it to kill the path
	port int

	mu   sync.Mutex     // guards seen
	seen map[string]int // requests served, by "proto method URI"
}

// served is how many times the server got method uri over proto
// ("HTTP/1.1", "HTTP/2.0" or "HTTP/3.0").
func (e *deadPathEnv) served(proto, method, uri string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen[proto+" "+method+" "+uri]
}

// newDeadPathEnv serves protoHandler's echo, and on /slow the same after
// slow, over both protocols; maxConns is the Transport's MaxConnsPerHost.
func newDeadPathEnv(t *testing.T, slow time.Duration, maxConns int) *deadPathEnv {
	t.Helper()
	e := &deadPathEnv{seen: map[string]int{}}
	h := &protoHandler{extra: func(w http.ResponseWriter, r *http.Request) bool {
		e.mu.Lock()
		e.seen[r.Proto+" "+r.Method+" "+r.URL.RequestURI()]++
		e.mu.Unlock()
		if r.URL.Path == "/slow" {
			select {
			case <-time.After(slow):
			case <-r.Context().Done():
				return true
			}
		}
		return false
	}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h3srv := &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(h3Cert(t).ServerConfig())}
	served := make(chan struct{})
	go func() { h3srv.Serve(pc); close(served) }()
	t.Cleanup(func() { h3srv.Close(); pc.Close(); <-served })
	port := pc.LocalAddr().(*net.UDPAddr).Port
	h.setAltSvc(altValue("", port))
	u := startTLSProto(t, h, true)
	tr := newH3Transport(t, func(tr *Transport) { tr.MaxConnsPerHost = maxConns })
	fetch(t, tr, "GET", u, nil)
	if maxConns > 0 {
		fetch(t, tr, "GET", u, nil) // with a limit, a request starts the QUIC dial
	}
	eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
	if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
		t.Fatalf("warm-up went over %s", resp.Proto)
	}
	e.tr, e.u, e.pc, e.port = tr, u, pc, port
	return e
}

// do sends req with a 20 s hang guard and returns the protocol and body.
func (e *deadPathEnv) do(req *http.Request) (proto, body string, err error) {
	ctx, cancel := context.WithTimeout(req.Context(), 20*time.Second)
	defer cancel()
	resp, err := e.tr.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.Proto, string(b), err
}

// TestH3DeadPathLaterRequestsUseTCP: the first request after the path died
// goes out on the dead connection (nothing tells it apart yet), waits for
// the judgement and is sent again over TCP; the alternative is then broken,
// so the requests after it go over TCP at once: no wait for a QUIC dial, no
// new dial, no retry.
func TestH3DeadPathLaterRequestsUseTCP(t *testing.T) {
	for _, maxConns := range []int{0, 1} {
		t.Run(fmt.Sprintf("MaxConnsPerHost=%d", maxConns), func(t *testing.T) {
			stressLeakCheck(t, func(t *testing.T) { deadPathLaterRequests(t, maxConns) })
		})
	}
}

func deadPathLaterRequests(t *testing.T, maxConns int) {
	{
		e := newDeadPathEnv(t, 0, maxConns)
		e.pc.Close()
		req, _ := http.NewRequest("GET", e.u+"/first", nil)
		start := time.Now()
		proto, body, err := e.do(req)
		if err != nil || !isTCPProto(proto) || !strings.HasSuffix(body, " ") {
			t.Fatalf("request on the dead path: %s %q %v, want it answered over TCP", proto, body, err)
		}
		t.Logf("first request: %s after %v", proto, time.Since(start))
		if !brokenAlt(t, e.tr, e.u, e.port) {
			t.Error("the alternative is not marked broken")
		}
		st := e.tr.Stats()
		if st.AltSvc.Broken != 1 || st.Requests.Retries != 1 {
			t.Errorf("Stats: Broken %d, Retries %d; want 1, 1", st.AltSvc.Broken, st.Requests.Retries)
		}
		waits := e.tr.h3.waits.Load()
		for i := 0; i < 5; i++ {
			req, _ := http.NewRequest("GET", e.u, nil)
			if proto, _, err := e.do(req); err != nil || !isTCPProto(proto) {
				t.Fatalf("request %d while broken: %s %v", i, proto, err)
			}
		}
		st = e.tr.Stats()
		if w := e.tr.h3.waits.Load(); w != waits || st.Requests.Retries != 1 || st.AltSvc.Broken != 1 {
			t.Errorf("while broken: head-start waits %d -> %d, Retries %d, Broken %d; want no wait, no retry, no new mark",
				waits, w, st.Requests.Retries, st.AltSvc.Broken)
		}
		flights, _ := e.tr.h3.flights.Running()
		if flights != 0 {
			t.Errorf("%d QUIC dials in progress while the alternative is broken", flights)
		}
		stressPoolEmpty(t, e.tr)
	}
}

// TestH3DeadPathReplayRules: a request lost with the dead connection may
// have reached the server, so only a replayable one (net/http's rule for a
// reused connection that broke before any response byte) is sent again
// over TCP, its body rewound; any other fails with an error that wraps
// h3conn.ErrPathDead and says why it was not sent again.
func TestH3DeadPathReplayRules(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		body    string
		noGet   bool // no GetBody
		header  string
		retried bool
	}{
		{name: "GET", method: "GET", retried: true},
		{name: "HEAD", method: "HEAD", retried: true},
		{name: "PUT with Idempotency-Key and GetBody", method: "PUT", body: "payload", header: "Idempotency-Key", retried: true},
		{name: "POST with GetBody", method: "POST", body: "payload"},
		{name: "POST with Idempotency-Key, no GetBody", method: "POST", body: "payload", noGet: true, header: "Idempotency-Key"},
		{name: "GET with a body, no GetBody", method: "GET", body: "payload", noGet: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stressLeakCheck(t, func(t *testing.T) {
				e := newDeadPathEnv(t, 0, 0)
				e.pc.Close()
				var rd io.Reader
				if tc.body != "" {
					rd = strings.NewReader(tc.body)
				}
				req, _ := http.NewRequest(tc.method, e.u, rd)
				if tc.noGet {
					req.Body = io.NopCloser(strings.NewReader(tc.body))
					req.GetBody = nil
				}
				if tc.header != "" {
					req.Header.Set(tc.header, "k1")
				}
				proto, body, err := e.do(req)
				if tc.retried {
					want := ""
					if tc.method != "HEAD" {
						want = proto + " " + tc.body
					}
					if err != nil || !isTCPProto(proto) || body != want {
						t.Fatalf("%s %q %v, want %q over TCP", proto, body, err, want)
					}
				} else {
					if !errors.Is(err, h3conn.ErrPathDead) || !strings.Contains(err.Error(), "not replayable") {
						t.Fatalf("%s %q %v, want an error wrapping ErrPathDead that says it was not sent again", proto, body, err)
					}
					t.Logf("%v", err)
				}
				if !brokenAlt(t, e.tr, e.u, e.port) {
					t.Error("the alternative is not marked broken")
				}
				req, _ = http.NewRequest("GET", e.u, nil)
				if proto, _, err := e.do(req); err != nil || !isTCPProto(proto) {
					t.Errorf("next request: %s %v, want TCP", proto, err)
				}
				stressPoolEmpty(t, e.tr)
			})
		})
	}
}

// TestH3SlowServerKeepsConnection: a server that takes 3 s (three times
// the dead-path threshold on loopback) to answer, on a path that works,
// while the client is silent (a GET) and while it sends (an upload of a
// chunk every 250 ms): both are answered over HTTP/3, the connection is
// not judged dead and serves the next request.
func TestH3SlowServerKeepsConnection(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		const hold = 3 * time.Second
		e := newDeadPathEnv(t, hold, 0)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", e.u+"/slow", nil)
			if proto, body, err := e.do(req); err != nil || proto != "HTTP/3.0" || body != "HTTP/3.0 " {
				t.Errorf("slow answer: %s %q %v, want it over HTTP/3", proto, body, err)
			}
		}()
		go func() {
			defer wg.Done()
			pr, pw := io.Pipe()
			go func() {
				for i := 0; i < int(hold/(250*time.Millisecond)); i++ {
					time.Sleep(250 * time.Millisecond)
					pw.Write([]byte("x"))
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", e.u+"/slow", pr)
			want := "HTTP/3.0 " + strings.Repeat("x", int(hold/(250*time.Millisecond)))
			if proto, body, err := e.do(req); err != nil || proto != "HTTP/3.0" || body != want {
				t.Errorf("slow upload: %s %q %v, want it over HTTP/3", proto, body, err)
			}
		}()
		wg.Wait()
		if brokenAlt(t, e.tr, e.u, e.port) || e.tr.Stats().AltSvc.Broken != 0 {
			t.Fatal("a slow server on a working path was judged dead")
		}
		req, _ := http.NewRequest("GET", e.u, nil)
		if proto, _, err := e.do(req); err != nil || proto != "HTTP/3.0" {
			t.Fatalf("next request: %s %v, want HTTP/3", proto, err)
		}
		if r := e.tr.Stats().Requests.Retries; r != 0 {
			t.Errorf("Retries = %d, want 0", r)
		}
		stressPoolEmpty(t, e.tr)
	})
}

// TestH3DeadPathConcurrentStarts: requests start one after another while
// the connection's path is dead, before, during and after its judgement
// (some on the dead connection, some racing its removal, some once the
// alternative is broken). Every GET is answered over TCP and reaches the
// server once; a POST without an Idempotency-Key reaches the server at
// most once and, when it failed with ErrPathDead, never over TCP. Nothing
// leaks and the pool ends empty.
func TestH3DeadPathConcurrentStarts(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		e := newDeadPathEnv(t, 0, 0)
		e.pc.Close()
		const n = 12
		type result struct {
			method, uri, proto string
			err                error
		}
		results := make(chan result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 150 * time.Millisecond) // 0 to 1.65 s: across the judgement
				method, uri := "GET", fmt.Sprintf("/get?i=%d", i)
				var body io.Reader
				if i%3 == 2 {
					method, uri, body = "POST", fmt.Sprintf("/post?i=%d", i), strings.NewReader("payload")
				}
				req, _ := http.NewRequest(method, e.u+uri, body)
				proto, _, err := e.do(req)
				results <- result{method, uri, proto, err}
			}()
		}
		wg.Wait()
		close(results)
		for r := range results {
			tcp := e.served("HTTP/1.1", r.method, r.uri) + e.served("HTTP/2.0", r.method, r.uri)
			switch {
			case r.method == "GET" && (r.err != nil || !isTCPProto(r.proto) || tcp != 1):
				t.Errorf("%s %s: %s %v, served over TCP %d times; want once, answered over TCP", r.method, r.uri, r.proto, r.err, tcp)
			case r.method == "POST" && r.err != nil && (tcp != 0 || !errors.Is(r.err, h3conn.ErrPathDead)):
				t.Errorf("%s %s failed (%v) yet served over TCP %d times", r.method, r.uri, r.err, tcp)
			case r.method == "POST" && r.err == nil && tcp != 1:
				t.Errorf("%s %s answered (%s) but served over TCP %d times", r.method, r.uri, r.proto, tcp)
			}
			t.Logf("%s %s: %s %v (TCP %d)", r.method, r.uri, r.proto, r.err, tcp)
		}
		if !brokenAlt(t, e.tr, e.u, e.port) {
			t.Error("the alternative is not marked broken")
		}
		stressPoolEmpty(t, e.tr)
	})
}
