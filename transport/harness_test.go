package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
)

// The differential harness: every scenario runs against net/http.Transport
// and against ferry's Transport, each with its own fresh loopback server of
// the same kind, and what the client saw (status, headers, body, error
// kind, trace) and what the server saw (requests, connections) must match.

// settings are the Transport fields scenarios vary, applied to both.
type settings struct {
	DisableKeepAlives      bool
	DisableCompression     bool
	MaxConnsPerHost        int
	MaxIdleConnsPerHost    int
	ResponseHeaderTimeout  time.Duration
	ExpectContinueTimeout  time.Duration
	MaxResponseHeaderBytes int64
	ForceAttemptHTTP2      bool
}

func (s settings) nethttp(tlsCfg *tls.Config) http.RoundTripper {
	return &http.Transport{
		ForceAttemptHTTP2:      s.ForceAttemptHTTP2,
		DisableKeepAlives:      s.DisableKeepAlives,
		DisableCompression:     s.DisableCompression,
		MaxConnsPerHost:        s.MaxConnsPerHost,
		MaxIdleConnsPerHost:    s.MaxIdleConnsPerHost,
		ResponseHeaderTimeout:  s.ResponseHeaderTimeout,
		ExpectContinueTimeout:  s.ExpectContinueTimeout,
		MaxResponseHeaderBytes: s.MaxResponseHeaderBytes,
		TLSClientConfig:        tlsCfg,
	}
}

// ferry is the same settings on ferry's Transport, taken over with From
// (which TestFromCopiesEveryField checks field by field).
func (s settings) ferry(tlsCfg *tls.Config) http.RoundTripper {
	return From(s.nethttp(tlsCfg).(*http.Transport))
}

// seenRequest is a request as the server saw it.
type seenRequest struct {
	Method, URI string
	Header      http.Header
	Body        string
	Trailer     http.Header
}

// testServer is one loopback server: an httptest server running a handler,
// or a raw TCP listener running a script per connection.
type testServer struct {
	URL string

	mu     sync.Mutex // guards seen, conns, raw and protos
	seen   []seenRequest
	conns  int
	raw    []string       // raw request heads seen by a scripted server
	protos map[string]int // requests a handler server read, by protocol

	hs    *httptest.Server
	ln    net.Listener
	rawS  *testpeer.RawServer // a scripted server's connections
	close chan struct{}
}

func (s *testServer) record(r seenRequest) {
	s.mu.Lock()
	s.seen = append(s.seen, r)
	s.mu.Unlock()
}

// seenCount is the number of requests the server has read.
func (s *testServer) seenCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// liveCount is the number of connections a scripted server has open.
func (s *testServer) liveCount() int { return s.rawS.Live() }

// connCount is the number of connections the server has accepted.
func (s *testServer) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// abort closes every connection the server has (and, for a scripted
// server, its listener), so a client blocked on it gets an error instead of
// waiting forever.
func (s *testServer) abort() {
	if s.hs != nil {
		s.hs.CloseClientConnections()
		return
	}
	s.rawS.Abort()
}

// startHandlerServer serves h, recording each request (its body is read
// first and replaced, so h sees it too).
func startHandlerServer(t *testing.T, h http.HandlerFunc, useTLS bool, cert *selfsigned.Cert) *testServer {
	return startHandlerServerH2(t, h, useTLS, false, cert)
}

// startHandlerServerH2 is startHandlerServer that, with TLS and h2, also
// offers HTTP/2 by ALPN.
func startHandlerServerH2(t *testing.T, h http.HandlerFunc, useTLS, h2 bool, cert *selfsigned.Cert) *testServer {
	s := &testServer{protos: map[string]int{}}
	rec := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hdr := r.Header.Clone()
		s.mu.Lock()
		s.protos[r.Proto]++
		s.mu.Unlock()
		s.record(seenRequest{Method: r.Method, URI: r.RequestURI, Header: hdr, Body: string(body), Trailer: r.Trailer.Clone()})
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		h(w, r)
	}
	s.hs = httptest.NewUnstartedServer(http.HandlerFunc(rec))
	s.hs.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.hs.Config.ErrorLog = nilLogger()
	if useTLS {
		s.hs.TLS = cert.ServerConfig()
		if h2 {
			s.hs.EnableHTTP2 = true
			s.hs.TLS.NextProtos = []string{"h2", "http/1.1"}
		}
		s.hs.StartTLS()
	} else {
		s.hs.Start()
	}
	s.URL = s.hs.URL
	t.Cleanup(s.hs.Close)
	return s
}

// rawConn is a scripted server's view of one connection.
type rawConn struct {
	net.Conn
	br *bufio.Reader
	s  *testServer
	n  int // index of this connection
}

// readRequest reads one request head (and a Content-Length body) and
// records the head; it returns the head.
func (c *rawConn) readRequest() (string, error) {
	req, err := http.ReadRequest(c.br)
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(req.Body)
	c.s.record(seenRequest{Method: req.Method, URI: req.RequestURI, Header: req.Header, Body: string(body), Trailer: req.Trailer})
	return req.Method + " " + req.RequestURI, nil
}

// startRawServer runs script for every accepted connection.
func startRawServer(t *testing.T, script func(c *rawConn)) *testServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveRaw(t, ln, script)
}

// serveRaw is startRawServer on a listener the caller made (small socket
// buffers, TLS, IPv6): it runs script on each connection it accepts
// (testpeer.ServeRaw) and, when the test ends, closes s.close, then the
// listener and every live connection, and waits for the scripts. URL is
// "http://" and the listener's address.
func serveRaw(tb testing.TB, ln net.Listener, script func(c *rawConn)) *testServer {
	s := &testServer{ln: ln, URL: "http://" + ln.Addr().String(), close: make(chan struct{})}
	s.rawS = testpeer.ServeRaw(tb, ln, func(n int, c net.Conn) {
		s.mu.Lock()
		s.conns++
		s.mu.Unlock()
		script(&rawConn{Conn: c, br: bufio.NewReader(c), s: s, n: n})
	})
	tb.Cleanup(func() { close(s.close) }) // runs first: scripts waiting on it end
	return s
}

// observation is what one request looked like from the client.
type observation struct {
	Status        int
	Proto         string
	Header        http.Header
	Body          string
	BodyErr       string
	ContentLength int64
	Uncompressed  bool
	Close         bool
	Trailer       http.Header
	TE            []string
	Err           string
	TLS           bool
}

// errKind classifies an error the way callers test errors.
func errKind(err error) string {
	if err == nil {
		return ""
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded) && errors.As(err, &ne) && ne.Timeout():
		return "deadline+timeout"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error"
}

// observe performs req with rt and reads the whole body.
func observe(rt http.RoundTripper, req *http.Request) observation {
	return observeResponse(rt.RoundTrip(req))
}

// observeResponse is observe for a RoundTrip already made: it reads the
// whole body.
func observeResponse(resp *http.Response, err error) observation {
	if err != nil {
		return observation{Err: errKind(err) + ": " + normalizeErr(err)}
	}
	defer resp.Body.Close()
	body, berr := io.ReadAll(resp.Body)
	o := observation{
		Status: resp.StatusCode, Proto: resp.Proto, Header: cleanHeader(resp.Header),
		Body: string(body), ContentLength: resp.ContentLength, Uncompressed: resp.Uncompressed,
		Close: resp.Close, Trailer: resp.Trailer, TE: resp.TransferEncoding, TLS: resp.TLS != nil,
	}
	if berr != nil {
		o.BodyErr = errKind(berr) + ": " + normalizeErr(berr)
	}
	return o
}

// normalizeErr removes addresses and ports that differ between runs.
func normalizeErr(err error) string {
	s := err.Error()
	for _, f := range strings.Fields(s) {
		f = strings.Trim(f, `":,`)
		if _, _, e := net.SplitHostPort(f); e == nil && strings.Count(f, ":") >= 1 && strings.ContainsAny(f, "0123456789") {
			s = strings.ReplaceAll(s, f, "ADDR")
		}
	}
	return s
}

func cleanHeader(h http.Header) http.Header {
	h = h.Clone()
	h.Del("Date")
	return h
}

// traceRecorder collects the httptrace hooks in order.
type traceRecorder struct {
	mu    sync.Mutex // guards ev and added
	ev    []string
	added chan struct{} // closed (and replaced) when an event is added
	opt   bool          // include DNS and connect hooks
}

func (r *traceRecorder) add(s string) {
	r.mu.Lock()
	r.ev = append(r.ev, s)
	if r.added != nil {
		close(r.added)
		r.added = nil
	}
	r.mu.Unlock()
}

// await blocks until an event of the hook named h was recorded, or d passed
// (then the event is missing and the comparison shows it).
func (r *traceRecorder) await(h string, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		r.mu.Lock()
		for _, e := range r.ev {
			if hookName(e) == h {
				r.mu.Unlock()
				return
			}
		}
		if r.added == nil {
			r.added = make(chan struct{})
		}
		added := r.added
		r.mu.Unlock()
		select {
		case <-added:
		case <-timer.C:
			return
		}
	}
}

func (r *traceRecorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ev...)
}

func (r *traceRecorder) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn: func(string) { r.add("GetConn") },
		GotConn: func(i httptrace.GotConnInfo) {
			r.add(fmt.Sprintf("GotConn(reused=%v,wasIdle=%v)", i.Reused, i.WasIdle))
		},
		PutIdleConn:          func(err error) { r.add(fmt.Sprintf("PutIdleConn(%v)", err)) },
		GotFirstResponseByte: func() { r.add("GotFirstResponseByte") },
		Got100Continue:       func() { r.add("Got100Continue") },
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			r.add(fmt.Sprintf("Got1xx(%d)", code))
			return nil
		},
		DNSStart:          func(httptrace.DNSStartInfo) { r.add("DNSStart") },
		DNSDone:           func(httptrace.DNSDoneInfo) { r.add("DNSDone") },
		ConnectStart:      func(string, string) { r.add("ConnectStart") },
		ConnectDone:       func(_, _ string, err error) { r.add(fmt.Sprintf("ConnectDone(%v)", err != nil)) },
		TLSHandshakeStart: func() { r.add("TLSHandshakeStart") },
		TLSHandshakeDone:  func(_ tls.ConnectionState, err error) { r.add(fmt.Sprintf("TLSHandshakeDone(%v)", err != nil)) },
		WroteHeaderField: func(k string, v []string) {
			if k == "Host" || k == ":authority" {
				v = []string{"HOST"} // the port differs per server
			}
			r.add("WroteHeaderField(" + k + "=" + strings.Join(v, ",") + ")")
		},
		WroteHeaders:    func() { r.add("WroteHeaders") },
		Wait100Continue: func() { r.add("Wait100Continue") },
		WroteRequest:    func(i httptrace.WroteRequestInfo) { r.add(fmt.Sprintf("WroteRequest(%v)", i.Err != nil)) },
	}
}

// countFDs returns the number of open file descriptors of this process,
// pipes excepted: on Linux io.Copy between two TCP connections (the test
// proxies' tunnels, a body copied to a connection) splices through a pipe
// pair from the runtime's pool, which keeps it open until a garbage
// collection drops it, so pipes come and go in pairs with GC timing. Nothing
// here opens a pipe of its own; leaked connections are sockets and count.
func countFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "pipe:") {
			continue
		}
		n++
	}
	return n
}

func sortedKeys(h http.Header) []string {
	var ks []string
	for k := range h {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// closeIdle closes idle connections of either transport.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func httptraceWith(ctx context.Context, rec *traceRecorder) context.Context {
	return httptrace.WithClientTrace(ctx, rec.trace())
}

func nilLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// netDialer is a plain net.Dialer, as a user DialContext.
type netDialer struct{ net.Dialer }

// netConnStub is a net.Conn that does nothing (parser tests never do I/O
// through it).
type netConnStub struct{ net.Conn }
