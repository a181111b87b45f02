package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// The HTTP/2 rows of the differential suite: each runs against
// net/http.Transport and against ferry's Transport (made with From from an
// identically configured http.Transport, so From's protocol answer is
// tested too), each with its own loopback server of the same kind. What the
// client observed, what the server saw (with the protocol of every request)
// and the connections must match, and the protocol must be the expected one
// (so a row cannot pass with both sides quietly on HTTP/1.1).

// h2ServerKind says what a row's server speaks.
type h2ServerKind struct {
	tlsH2      bool   // TLS offering h2 and http/1.1 (else TLS http/1.1 only, unless h2c)
	h2c        bool   // cleartext, HTTP/1 and HTTP/2 with prior knowledge
	maxStreams uint32 // SETTINGS_MAX_CONCURRENT_STREAMS; 0: default
}

// connCount says how a row compares connections.
type connCount int

const (
	countAccepted connCount = iota // TCP connections accepted
	countServed                    // distinct connections that served requests
	countNone                      // racy by design
	// countServedNoSpare compares the connections that served requests, and
	// ferry must have dialed no other. For h2c with prior knowledge net/http
	// pools the new connection from the dialing goroutine only after handing
	// it to the first request, so a quick second request may start a spare
	// dial, which it closes unused once the pooled connection shows up.
	countServedNoSpare
)

type h2Row struct {
	name      string
	srv       h2ServerKind
	handler   func(s *h2Server) http.HandlerFunc
	mk        func(std *http.Transport) // client configuration on top of h2BaseClient
	run       func(t *testing.T, rt http.RoundTripper, s *h2Server) []any
	wantProto string // every request the server saw used this protocol
	count     connCount
	wantConns int // when > 0, the expected connection count for both sides
	// ferryOnly, when set, says why net/http cannot run the row; ferry's
	// result is then checked against the expectations alone.
	ferryOnly string
}

// h2Server is a loopback server for the HTTP/2 rows.
type h2Server struct {
	*testServer
	mu      sync.Mutex // guards served, protos
	served  map[string]bool
	protos  map[string]bool
	arrived chan struct{} // one send per request, before the handler runs
	release chan struct{} // closed by a row to let blocked handlers finish
}

func startH2Server(t *testing.T, kind h2ServerKind, mkHandler func(*h2Server) http.HandlerFunc, cert *selfsigned.Cert) *h2Server {
	s := &h2Server{testServer: &testServer{}, served: map[string]bool{}, protos: map[string]bool{},
		arrived: make(chan struct{}, 1024), release: make(chan struct{})}
	h := mkHandler(s)
	rec := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.record(seenRequest{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body), Trailer: r.Trailer.Clone()})
		s.mu.Lock()
		s.served[r.RemoteAddr] = true
		s.protos[r.Proto] = true
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		s.arrived <- struct{}{}
		h(w, r)
	}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(rec))
	s.hs = hs
	hs.Config.ErrorLog = nilLogger()
	hs.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.testServer.mu.Lock()
			s.conns++
			s.testServer.mu.Unlock()
		}
	}
	if kind.maxStreams > 0 {
		hs.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: int(kind.maxStreams)}
	}
	switch {
	case kind.h2c:
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		hs.Config.Protocols = &p
		hs.Start()
	default:
		hs.EnableHTTP2 = kind.tlsH2
		hs.TLS = cert.ServerConfig()
		if kind.tlsH2 {
			hs.TLS.NextProtos = []string{"h2", "http/1.1"}
		}
		hs.StartTLS()
	}
	s.URL = hs.URL
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		hs.Close()
	})
	return s
}

// waitArrivals waits until n requests reached the handler (or fails).
func (s *h2Server) waitArrivals(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-s.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d requests arrived", i, n)
		}
	}
}

func h2BaseClient(cert *selfsigned.Cert) *http.Transport {
	return &http.Transport{TLSClientConfig: cert.ClientConfig(), ForceAttemptHTTP2: true}
}

func static(h http.HandlerFunc) func(*h2Server) http.HandlerFunc {
	return func(*h2Server) http.HandlerFunc { return h }
}

func protocolsOf(names ...string) *http.Protocols {
	var p http.Protocols
	for _, n := range names {
		switch n {
		case "h1":
			p.SetHTTP1(true)
		case "h2":
			p.SetHTTP2(true)
		case "h2c":
			p.SetUnencryptedHTTP2(true)
		}
	}
	return &p
}

// concurrentGets runs n GETs at once (after warm GETs run one by one) and
// reports the sorted results.
func concurrentGets(warm, n int) func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
	return func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
		var out []any
		for i := 0; i < warm; i++ {
			o := observe(rt, newReq(t, "GET", s.URL+"/warm", nil))
			out = append(out, o.Status, o.Proto, o.Body, o.Err)
		}
		res := make([]string, n)
		var wg sync.WaitGroup
		// Bounded: net/http's strict stream accounting can stall queued
		// requests (golang/go#70809); such a stall must fail the row with a
		// deadline error in the comparison, not hang the suite.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				o := observe(rt, newReq(t, "GET", s.URL+"/c", nil).WithContext(ctx))
				res[i] = fmt.Sprintf("%d %s %s %s", o.Status, o.Proto, o.Body, o.Err)
			}(i)
		}
		wg.Wait()
		sort.Strings(res)
		s.testServer.mu.Lock()
		s.seen = nil // order differs between runs
		s.testServer.mu.Unlock()
		return append(out, res)
	}
}

// barrier lets a handler answer only once n requests are in flight at the
// same time (or after a generous timeout, which fails the row's count).
func barrier(n int) func(s *h2Server) http.HandlerFunc {
	return func(s *h2Server) http.HandlerFunc {
		var mu sync.Mutex
		in := 0
		all := make(chan struct{})
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/c" {
				mu.Lock()
				in++
				if in == n {
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
				case <-time.After(30 * time.Second):
				}
			}
			io.WriteString(w, "ok")
		}
	}
}

var h2Rows = []h2Row{
	{name: "alpn/default-h2", srv: h2ServerKind{tlsH2: true}, handler: static(hello), run: ts(gets(3, "/a")), wantProto: "HTTP/2.0", wantConns: 1},
	{name: "alpn/tlsconfig-without-force-is-h1", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		mk: func(s *http.Transport) { s.ForceAttemptHTTP2 = false }, run: ts(gets(2, "/")), wantProto: "HTTP/1.1", wantConns: 1},
	{name: "alpn/server-without-h2", srv: h2ServerKind{}, handler: static(hello), run: ts(gets(2, "/")), wantProto: "HTTP/1.1", wantConns: 1},
	{name: "protocols/http1-only", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		mk: func(s *http.Transport) { s.Protocols = protocolsOf("h1") }, run: ts(gets(2, "/")), wantProto: "HTTP/1.1", wantConns: 1},
	{name: "protocols/http2-only", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		mk: func(s *http.Transport) { s.Protocols = protocolsOf("h2") }, run: ts(gets(2, "/")), wantProto: "HTTP/2.0", wantConns: 1},
	{name: "protocols/h2c-prior-knowledge", srv: h2ServerKind{h2c: true}, handler: static(hello),
		mk: func(s *http.Transport) { s.Protocols = protocolsOf("h2c") }, run: ts(gets(2, "/")), wantProto: "HTTP/2.0", count: countServedNoSpare, wantConns: 1},
	{name: "protocols/h1-and-h2c-is-h1", srv: h2ServerKind{h2c: true}, handler: static(hello),
		mk: func(s *http.Transport) { s.Protocols = protocolsOf("h1", "h2c") }, run: ts(gets(2, "/")), wantProto: "HTTP/1.1", wantConns: 1},
	{name: "tlsnextproto/empty-map-disables-h2", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		mk: func(s *http.Transport) {
			s.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}, run: ts(gets(2, "/")), wantProto: "HTTP/1.1", wantConns: 1},
	{name: "multiplex/8-concurrent-one-conn", srv: h2ServerKind{tlsH2: true}, handler: barrier(8),
		run: concurrentGets(1, 8), wantProto: "HTTP/2.0", wantConns: 1},
	{name: "push/refused", srv: h2ServerKind{tlsH2: true}, handler: static(func(w http.ResponseWriter, r *http.Request) {
		p, ok := w.(http.Pusher)
		if !ok {
			io.WriteString(w, "no pusher")
			return
		}
		fmt.Fprint(w, p.Push("/pushed", nil))
	}), run: ts(gets(1, "/")), wantProto: "HTTP/2.0"},
	{name: "trailers/response", srv: h2ServerKind{tlsH2: true}, handler: static(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T")
		io.WriteString(w, "part1")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part2")
		w.Header().Set("X-T", "tv")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	}), run: ts(gets(2, "/")), wantProto: "HTTP/2.0"},
	{name: "trailers/request", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		run: ts(one("POST", "/t", func() io.Reader { return &streamBody{strings.NewReader("abc")} }, func(r *http.Request) {
			r.Trailer = http.Header{"X-Sum": {"42"}}
		})), wantProto: "HTTP/2.0"},
	{name: "body/large-both-ways", srv: h2ServerKind{tlsH2: true}, handler: static(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d|", len(b))
		w.Write([]byte(big))
	}), run: func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
		o1 := observe(rt, newReq(t, "POST", s.URL, strings.NewReader(big)))
		o2 := observe(rt, newReq(t, "POST", s.URL, &streamBody{strings.NewReader(big)}))
		s.testServer.mu.Lock()
		for i := range s.seen {
			s.seen[i].Body = fmt.Sprint(len(s.seen[i].Body))
		}
		s.testServer.mu.Unlock()
		return []any{o1.Status, len(o1.Body), o1.Body[:8], o1.Err, o2.Status, len(o2.Body), o2.Body[:8], o2.Err}
	}, wantProto: "HTTP/2.0", wantConns: 1},
	{name: "compression/gzip", srv: h2ServerKind{tlsH2: true}, handler: static(gzipHandler), run: ts(gets(2, "/")), wantProto: "HTTP/2.0"},
	{name: "compression/disabled", srv: h2ServerKind{tlsH2: true}, handler: static(gzipHandler),
		mk: func(s *http.Transport) { s.DisableCompression = true }, run: ts(gets(1, "/")), wantProto: "HTTP/2.0"},
	{name: "keepalive/head-and-204", srv: h2ServerKind{tlsH2: true}, handler: static(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/204" {
			w.WriteHeader(204)
			return
		}
		hello(w, r)
	}), run: func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
		return append(one("HEAD", "/h", nil, nil)(t, rt, s.testServer), gets(2, "/204")(t, rt, s.testServer)...)
	}, wantProto: "HTTP/2.0", wantConns: 1},
	{name: "keepalive/disabled-one-conn-per-request", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		mk: func(s *http.Transport) { s.DisableKeepAlives = true }, run: ts(gets(2, "/")), wantProto: "HTTP/2.0", wantConns: 2},
	{name: "cancel/one-stream-not-the-others", srv: h2ServerKind{tlsH2: true}, handler: func(s *h2Server) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-s.release:
				}
				return
			}
			io.WriteString(w, "fine")
		}
	}, run: func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
		o0 := observe(rt, newReq(t, "GET", s.URL+"/warm", nil))
		s.waitArrivals(t, 1)
		ctx, cancel := context.WithCancel(context.Background())
		// RoundTrip returns once the handler flushed the head; the stream is
		// then canceled while its body is awaited. (Canceling when the
		// request reached the handler raced with the head's arrival.)
		resp, err := rt.RoundTrip(newReq(t, "GET", s.URL+"/slow", nil).WithContext(ctx))
		s.waitArrivals(t, 1)
		cancel()
		o1 := observeResponse(resp, err)
		o2 := observe(rt, newReq(t, "GET", s.URL+"/after", nil))
		return []any{o0.Body, o1.Status, o1.Err, o1.BodyErr, o2.Status, o2.Body, o2.Err}
	}, wantProto: "HTTP/2.0", wantConns: 1},
	{name: "goaway/shutdown-with-request-in-flight", srv: h2ServerKind{tlsH2: true}, handler: func(s *h2Server) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				<-s.release
			}
			io.WriteString(w, "done "+r.URL.Path)
		}
	}, run: func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
		done := make(chan observation, 1)
		go func() { done <- observe(rt, newReq(t, "GET", s.URL+"/slow", nil)) }()
		s.waitArrivals(t, 1)
		shut := make(chan error, 1)
		go func() { shut <- s.hs.Config.Shutdown(context.Background()) }()
		// Shutdown sends GOAWAY at once; the stream in flight must finish.
		time.Sleep(50 * time.Millisecond)
		close(s.release)
		o := <-done
		err := <-shut
		after := observe(rt, newReq(t, "GET", s.URL+"/after", nil)) // listener gone: a dial error, not a hang
		return []any{o, fmt.Sprint(err), after.Status, after.Err != ""}
	}, wantProto: "HTTP/2.0", wantConns: 1},
	{name: "limits/stream-limit-opens-more-conns", srv: h2ServerKind{tlsH2: true, maxStreams: 2}, handler: barrier(6),
		run: concurrentGets(1, 6), wantProto: "HTTP/2.0", count: countServed, wantConns: 3},
	{name: "limits/stream-limit-strict-waits", srv: h2ServerKind{tlsH2: true, maxStreams: 2}, handler: static(hello),
		mk: func(s *http.Transport) { s.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true} },
		// Two at once after a warm request: with more requests queued for a
		// stream on a 2-stream server, x/net's strict mode (net/http's
		// bundled copy too) deadlocks intermittently, the queued requests'
		// reservations counting against the limit; see the report.
		run: concurrentGets(1, 2), wantProto: "HTTP/2.0", count: countServed, wantConns: 1},
	{name: "errors/deadline-while-waiting", srv: h2ServerKind{tlsH2: true}, handler: func(s *h2Server) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-s.release:
			}
		}
	}, run: func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return []any{observe(rt, newReq(t, "GET", s.URL, nil).WithContext(ctx))}
	}, wantProto: "HTTP/2.0"},
	{name: "errors/already-canceled", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		run: func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			o1 := observe(rt, newReq(t, "GET", s.URL, nil).WithContext(ctx))
			return []any{o1, observe(rt, newReq(t, "GET", s.URL, nil))}
		}, wantProto: "HTTP/2.0"},
	{name: "errors/h2-forbidden-header", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		run: func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
			o0 := observe(rt, newReq(t, "GET", s.URL, nil))
			req := newReq(t, "GET", s.URL, nil)
			req.Header.Set("Transfer-Encoding", "foo")
			o1 := observe(rt, req)
			return []any{o0, o1}
		}, wantProto: "HTTP/2.0", count: countNone},
	{name: "tracing/get-twice", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		run: ts(tracedRequests(h2TraceLanes, []string{"WroteRequest"}, gets(2, "/"))), wantProto: "HTTP/2.0", wantConns: 1},
	{name: "websocket-upgrade-goes-h1", srv: h2ServerKind{tlsH2: true}, handler: static(hello),
		run: func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
			o0 := observe(rt, newReq(t, "GET", s.URL+"/h2", nil))
			req := newReq(t, "GET", s.URL+"/ws", nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			o1 := observe(rt, req)
			s.mu.Lock()
			s.protos = map[string]bool{"mixed": true}
			s.mu.Unlock()
			return []any{o0.Proto, o1.Proto, o1.Status}
		}, wantProto: "mixed", wantConns: 2},
}

func TestH2Differential(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range h2Rows {
		t.Run(row.name, func(t *testing.T) {
			var res [2]diffResult
			impls := []string{"nethttp", "ferry"}
			if row.ferryOnly != "" {
				t.Logf("ferry only: %s", row.ferryOnly)
				impls = impls[1:]
			}
			for i, impl := range impls {
				if row.ferryOnly != "" {
					i = 1
				}
				s := startH2Server(t, row.srv, row.handler, cert)
				std := h2BaseClient(cert)
				if row.mk != nil {
					row.mk(std)
				}
				var rt http.RoundTripper = std
				if impl == "ferry" {
					rt = From(std)
				}
				obs := row.run(t, rt, s)
				closeIdle(rt)
				s.testServer.mu.Lock()
				res[i] = diffResult{Obs: obs, Seen: s.seen, Conns: s.conns}
				s.testServer.mu.Unlock()
				s.mu.Lock()
				switch row.count {
				case countServed:
					res[i].Conns = len(s.served)
				case countServedNoSpare:
					if impl == "ferry" && res[i].Conns != len(s.served) {
						t.Errorf("ferry: %d connections accepted, %d served requests", res[i].Conns, len(s.served))
					}
					res[i].Conns = len(s.served)
				case countNone:
					res[i].Conns = 0
				}
				protos := sortedSet(s.protos)
				s.mu.Unlock()
				if want := []string{row.wantProto}; !reflect.DeepEqual(protos, want) {
					t.Errorf("%s: server saw protocols %v, want %v", impl, protos, want)
				}
				if row.wantConns > 0 && res[i].Conns != row.wantConns {
					t.Errorf("%s: %d connections, want %d", impl, res[i].Conns, row.wantConns)
				}
			}
			if row.ferryOnly != "" {
				return
			}
			if !reflect.DeepEqual(res[0].Obs, res[1].Obs) {
				t.Errorf("client observations differ\nnet/http: %+v\nferry:    %+v", res[0].Obs, res[1].Obs)
			}
			if !reflect.DeepEqual(res[0].Seen, res[1].Seen) {
				t.Errorf("server saw different requests\nnet/http: %+v\nferry:    %+v", res[0].Seen, res[1].Seen)
			}
			if res[0].Conns != res[1].Conns {
				t.Errorf("connections: net/http %d, ferry %d", res[0].Conns, res[1].Conns)
			}
		})
	}
}

// ts adapts a scenario function of the HTTP/1 table to an HTTP/2 row.
func ts(f func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, s *h2Server) []any {
	return func(t *testing.T, rt http.RoundTripper, s *h2Server) []any { return f(t, rt, s.testServer) }
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
