package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/ferryhttp/ferry/altsvc"
	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/server"
)

// Loopback servers for the HTTP/3 tests: ferry's own wrapper (h1/h2/h3 on
// one port with Alt-Svc), or a TCP server and a separate quic-go HTTP/3
// server whose Alt-Svc header the test controls.

// protoHandler answers with the protocol the request arrived on and records
// it; it echoes a request body.
type protoHandler struct {
	altSvc  atomic.Pointer[string] // Alt-Svc to send; nil sends none
	tcpOnly bool                   // send Alt-Svc on TCP responses only, as ferry's server does

	mu    sync.Mutex // guards seen
	seen  []string   // "proto remoteAddr" per request
	extra func(w http.ResponseWriter, r *http.Request) bool
}

func (h *protoHandler) setAltSvc(v string) { h.altSvc.Store(&v) }

func (h *protoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Proto+" "+r.RemoteAddr)
	h.mu.Unlock()
	if v := h.altSvc.Load(); v != nil && !(h.tcpOnly && r.ProtoMajor == 3) {
		w.Header().Set("Alt-Svc", *v)
	}
	if h.extra != nil && h.extra(w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s", r.Proto, body)
}

// h3Remotes returns the distinct client addresses of HTTP/3 requests: one
// per QUIC connection.
func (h *protoHandler) h3Remotes() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[string]bool{}
	for _, s := range h.seen {
		if len(s) > 9 && s[:9] == "HTTP/3.0 " {
			m[s[9:]] = true
		}
	}
	return m
}

var (
	testCertOnce sync.Once
	testCert     *selfsigned.Cert
	testCertErr  error
)

// h3Cert is a certificate for localhost, 127.0.0.1 and ::1, shared by the
// tests of the package.
func h3Cert(t testing.TB) *selfsigned.Cert {
	testCertOnce.Do(func() { testCert, testCertErr = selfsigned.New() })
	if testCertErr != nil {
		t.Fatal(testCertErr)
	}
	return testCert
}

// startWrapped serves h with ferry's server wrapper on 127.0.0.1 (h1 and
// h2 over TCP, h3 over UDP on the same port, Alt-Svc on TCP responses) and
// returns its https URL.
func startWrapped(t testing.TB, h http.Handler) string {
	srv := server.Wrap(&http.Server{
		Addr:      "127.0.0.1:0",
		Handler:   h,
		TLSConfig: h3Cert(t).ServerConfig(),
		ErrorLog:  nilLogger(),
	})
	if err := srv.ListenTLS("", ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return "https://" + srv.Addr().String()
}

// startTLS serves h over HTTP/1.1 with TLS on 127.0.0.1.
func startTLS(t testing.TB, h http.Handler) string { return startTLSProto(t, h, false) }

// startTLSProto serves h with TLS on 127.0.0.1, over HTTP/2 too if h2.
func startTLSProto(t testing.TB, h http.Handler, h2 bool) string {
	s := httptest.NewUnstartedServer(h)
	s.EnableHTTP2 = h2
	s.TLS = h3Cert(t).ServerConfig()
	s.Config.ErrorLog = nilLogger()
	s.StartTLS()
	t.Cleanup(s.Close)
	return s.URL
}

// startH3 serves h over HTTP/3 only, with cert (nil: the shared test
// certificate), on a UDP port of 127.0.0.1 it returns, and the server.
func startH3(t testing.TB, h http.Handler, cert *selfsigned.Cert) (int, *http3.Server) {
	if cert == nil {
		cert = h3Cert(t)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(cert.ServerConfig())}
	done := make(chan struct{})
	go func() { s.Serve(pc); close(done) }()
	t.Cleanup(func() { s.Close(); pc.Close(); <-done })
	return pc.LocalAddr().(*net.UDPAddr).Port, s
}

// blackholeUDP returns the port of a UDP socket that is never read: every
// datagram sent to it is swallowed, as on a network that drops UDP.
func blackholeUDP(t testing.TB) int {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// newH3Transport returns a Transport trusting the test certificate, closed
// at the end of the test.
func newH3Transport(t testing.TB, mod func(*Transport)) *Transport {
	tr := &Transport{TLSClientConfig: h3Cert(t).ClientConfig()}
	if mod != nil {
		mod(tr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// fetch sends a request and returns the protocol and the body.
func fetch(t testing.TB, tr http.RoundTripper, method, u string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, u, err)
	}
	return resp, string(b)
}

// isTCPProto reports a response that came over TCP.
func isTCPProto(p string) bool { return p == "HTTP/1.1" || p == "HTTP/2.0" }

// originOf is the altsvc origin of an https URL.
func originOf(t testing.TB, u string) altsvc.Origin {
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	o, err := altsvc.OriginFromHostPort("https", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// h3Ready reports whether tr holds an HTTP/3 connection for u's usable
// alternative.
func h3Ready(t testing.TB, tr *Transport, u string) bool {
	o := originOf(t, u)
	alt, ok := tr.altSvcCache().Usable(o, "h3")
	if !ok {
		return false
	}
	return tr.h3.pool.ConnsLen(h3Key{origin: o, altHost: alt.Host, altPort: alt.Port}) > 0
}

// eventually polls cond for up to 10 s; the QUIC handshake finishes in the
// background, so the tests wait for its outcome instead of sleeping.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// brokenAlt reports whether u's h3 alternative on port is marked broken.
func brokenAlt(t testing.TB, tr *Transport, u string, port int) bool {
	for _, a := range tr.altSvcCache().Lookup(originOf(t, u), nil) {
		if a.Protocol == "h3" && int(a.Port) == port && !a.BrokenUntil().IsZero() {
			return true
		}
	}
	return false
}

// advertise stores an h3 alternative for u in c, as a response would.
func advertise(t testing.TB, c *altsvc.Cache, u, value string) {
	if err := c.UpdateFromResponse(originOf(t, u), []string{value}, 0); err != nil {
		t.Fatal(err)
	}
}

func altValue(host string, port int) string {
	return `h3="` + net.JoinHostPort(host, strconv.Itoa(port)) + `"; ma=3600`
}

// fakeClock is a settable clock for the Alt-Svc cache.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// isTimeout reports a net.Error with Timeout() true.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// h3State returns how many HTTP/3 connections tr tracks and whether its
// UDP socket (Dialer) is open.
func h3State(tr *Transport) (conns int, dialerOpen bool) {
	dialerOpen = tr.h3.flights.Dialer() != nil
	tr.h3.mu.Lock()
	defer tr.h3.mu.Unlock()
	return len(tr.h3.conns), dialerOpen
}
