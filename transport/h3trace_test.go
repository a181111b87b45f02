package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h3conn"
	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// hookRecorder records the httptrace hooks of one request as short lines
// ("ConnectStart udp", "GotConn tcp reused idle"); runs of WroteHeaderField
// are one line. Hooks may come from quic-go's goroutines, hence the lock.
type hookRecorder struct {
	onTLSStart func() // called inside TLSHandshakeStart, if set

	mu     sync.Mutex // guards events and errs
	events []string
	errs   []error // errors given to the Done hooks, in order
}

func (r *hookRecorder) add(s string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s == "WroteHeaderField" && len(r.events) > 0 && r.events[len(r.events)-1] == s {
		return
	}
	if err != nil {
		s += " err"
		r.errs = append(r.errs, err)
	}
	r.events = append(r.events, s)
}

func (r *hookRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *hookRecorder) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

func (r *hookRecorder) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn:  func(string) { r.add("GetConn", nil) },
		DNSStart: func(httptrace.DNSStartInfo) { r.add("DNSStart", nil) },
		DNSDone:  func(i httptrace.DNSDoneInfo) { r.add("DNSDone", i.Err) },
		ConnectStart: func(network, addr string) {
			r.add("ConnectStart "+network, nil)
		},
		ConnectDone: func(network, addr string, err error) { r.add("ConnectDone "+network, err) },
		TLSHandshakeStart: func() {
			r.add("TLSHandshakeStart", nil)
			if r.onTLSStart != nil {
				r.onTLSStart()
			}
		},
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) { r.add("TLSHandshakeDone", err) },
		GotConn: func(i httptrace.GotConnInfo) {
			s := "GotConn " + i.Conn.RemoteAddr().Network()
			if i.Reused {
				s += " reused"
			}
			if i.WasIdle {
				s += " idle"
			}
			r.add(s, nil)
		},
		PutIdleConn:          func(err error) { r.add("PutIdleConn", err) },
		WroteHeaderField:     func(string, []string) { r.add("WroteHeaderField", nil) },
		WroteHeaders:         func() { r.add("WroteHeaders", nil) },
		WroteRequest:         func(i httptrace.WroteRequestInfo) { r.add("WroteRequest", i.Err) },
		GotFirstResponseByte: func() { r.add("GotFirstResponseByte", nil) },
	}
}

// tracedFetch sends a GET with rec's hooks and reads the whole response.
func tracedFetch(t *testing.T, tr http.RoundTripper, u string, rec *hookRecorder) *http.Response {
	t.Helper()
	ctx := httptrace.WithClientTrace(context.Background(), rec.trace())
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// manualTimer is a head-start timer the test ends by hand.
type manualTimer struct{ ch chan time.Time }

func newManualTimer() *manualTimer { return &manualTimer{ch: make(chan time.Time, 1)} }

func (m *manualTimer) start(time.Duration) (<-chan time.Time, func() bool) {
	return m.ch, func() bool { return true }
}

// fire ends the wait; firing twice is harmless.
func (m *manualTimer) fire() {
	select {
	case m.ch <- time.Time{}:
	default:
	}
}

// The response part every sequence ends with (a GET without a body).
var (
	exchangeHooks   = []string{"WroteHeaderField", "WroteHeaders", "WroteRequest", "GotFirstResponseByte"}
	tcpDialHooks    = []string{"ConnectStart tcp", "ConnectDone tcp", "TLSHandshakeStart", "TLSHandshakeDone"}
	quicDialHooks   = []string{"ConnectStart udp", "TLSHandshakeStart", "TLSHandshakeDone", "ConnectDone udp"}
	quicFailedHooks = []string{"ConnectStart udp", "TLSHandshakeStart", "TLSHandshakeDone err", "ConnectDone udp err"}
)

func seq(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			out = append(out, v)
		case []string:
			out = append(out, v...)
		}
	}
	return out
}

// TestH3TraceSequences: the exact hooks one request sees, per scenario,
// next to HTTP/2's for the same situation. GetConn fires once; the request
// that dials QUIC and waits sees the dial's hooks ("udp"); QUIC nests the
// TLS hooks inside the connect hooks; a request that stops waiting sees the
// open QUIC phases end with the reason, then the TCP dial.
func TestH3TraceSequences(t *testing.T) {
	untrusted, err := selfsigned.New()
	if err != nil {
		t.Fatal(err)
	}
	type setup struct {
		tr      *Transport
		u       string
		onTLS   func()
		wantErr error // every Done error must match it (errors.Is)
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) setup
		want  []string
		// x/net writes the request and reads the response on different
		// goroutines (as net/http's HTTP/2 does), so after GotConn its
		// hooks may interleave: compared as a set then.
		exchangeUnordered bool
	}{
		{
			name: "h2_first_dial",
			setup: func(t *testing.T) setup {
				u := startTLSProto(t, &protoHandler{}, true)
				return setup{tr: newH3Transport(t, func(tr *Transport) { tr.ForceAttemptHTTP2 = true }), u: u}
			},
			want:              seq("GetConn", tcpDialHooks, "GotConn tcp", exchangeHooks),
			exchangeUnordered: true,
		},
		{
			name: "h2_warm",
			setup: func(t *testing.T) setup {
				u := startTLSProto(t, &protoHandler{}, true)
				tr := newH3Transport(t, func(tr *Transport) { tr.ForceAttemptHTTP2 = true })
				fetch(t, tr, "GET", u, nil)
				return setup{tr: tr, u: u}
			},
			want:              seq("GetConn", "GotConn tcp reused idle", exchangeHooks),
			exchangeUnordered: true,
		},
		{
			name: "h3_first_dial",
			setup: func(t *testing.T) setup {
				tr, u := h3TraceServer(t, nil, "")
				return setup{tr: tr, u: u}
			},
			want: seq("GetConn", quicDialHooks, "GotConn udp", exchangeHooks),
		},
		{
			name: "h3_first_dial_named_alternative",
			setup: func(t *testing.T) setup {
				skipUnlessLocalhostIsIPv4(t)
				tr, u := h3TraceServer(t, nil, "localhost")
				return setup{tr: tr, u: u}
			},
			want: seq("GetConn", "DNSStart", "DNSDone", quicDialHooks, "GotConn udp", exchangeHooks),
		},
		{
			// Another dial is in progress (or just done): the request
			// joins it and sees none of its hooks.
			name: "h3_joins_a_dial",
			setup: func(t *testing.T) setup {
				tr, u := h3TraceServer(t, nil, "")
				o := originOf(t, u)
				alt, ok := tr.altSvcCache().Usable(o, "h3")
				if !ok {
					t.Fatal("no usable alternative")
				}
				tr.preconnectH3(tr.h3init(), o, alt, connKeyOf(t, tr, u))
				return setup{tr: tr, u: u}
			},
			want: seq("GetConn", "GotConn udp", exchangeHooks),
		},
		{
			name: "h3_warm",
			setup: func(t *testing.T) setup {
				tr, u := h3TraceServer(t, nil, "")
				if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
					t.Fatalf("warm-up over %s, want HTTP/3.0", resp.Proto)
				}
				return setup{tr: tr, u: u}
			},
			want: seq("GetConn", "GotConn udp reused idle", exchangeHooks),
		},
		{
			name: "h3_wrong_certificate_falls_back",
			setup: func(t *testing.T) setup {
				tr, u := h3TraceServer(t, untrusted, "")
				return setup{tr: tr, u: u}
			},
			want: seq("GetConn", quicFailedHooks, tcpDialHooks, "GotConn tcp", exchangeHooks, "PutIdleConn"),
		},
		{
			name: "h3_head_start_ends_falls_back",
			setup: func(t *testing.T) setup {
				timer := newManualTimer()
				u := startTLS(t, &protoHandler{})
				tr := newH3Transport(t, func(tr *Transport) {
					tr.h3.headStart = time.Minute
					tr.h3.handshakeTimeout = time.Minute
					tr.h3.headStartTimer = timer.start
				})
				advertise(t, tr.altSvcCache(), u, altValue("", blackholeUDP(t)))
				// The head start ends once the QUIC handshake began.
				return setup{tr: tr, u: u, onTLS: timer.fire, wantErr: h3conn.ErrHeadStartExpired}
			},
			want: seq("GetConn", quicFailedHooks, tcpDialHooks, "GotConn tcp", exchangeHooks, "PutIdleConn"),
		},
		{
			name: "h3_tcp_at_hand_no_wait",
			setup: func(t *testing.T) setup {
				u := startTLS(t, &protoHandler{})
				tr := newH3Transport(t, func(tr *Transport) {
					tr.h3.headStart = time.Minute
					tr.h3.handshakeTimeout = time.Minute
				})
				fetch(t, tr, "GET", u, nil) // an idle HTTP/1.1 connection
				advertise(t, tr.altSvcCache(), u, altValue("", blackholeUDP(t)))
				return setup{tr: tr, u: u}
			},
			want: seq("GetConn", "GotConn tcp reused idle", exchangeHooks, "PutIdleConn"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.setup(t)
			rec := &hookRecorder{onTLSStart: s.onTLS}
			tracedFetch(t, s.tr, s.u, rec)
			got := rec.lines()
			if tc.exchangeUnordered {
				got = sortAfterGotConn(got)
				tc.want = sortAfterGotConn(tc.want)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("hooks:\n got  %s\n want %s", strings.Join(got, ", "), strings.Join(tc.want, ", "))
			}
			if s.wantErr != nil {
				for _, err := range rec.errors() {
					if !errors.Is(err, s.wantErr) {
						t.Fatalf("Done hook error %v, want one matching %v", err, s.wantErr)
					}
				}
			}
		})
	}
}

// h3TraceServer starts an HTTP/3 server (cert nil: the trusted test
// certificate) and an HTTP/1.1 TCP server for the same origin, and a
// Transport that knows the alternative (on altHost, "" meaning the origin's
// host) and waits for its dial as long as it takes.
func h3TraceServer(t *testing.T, cert *selfsigned.Cert, altHost string) (*Transport, string) {
	h := &protoHandler{}
	port, _ := startH3(t, h, cert)
	u := startTLS(t, h)
	tr := newH3Transport(t, func(tr *Transport) { tr.h3.headStart = time.Minute })
	advertise(t, tr.altSvcCache(), u, altValue(altHost, port))
	return tr, u
}

func skipUnlessLocalhostIsIPv4(t *testing.T) {
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", "localhost")
	if err != nil || len(addrs) == 0 || addrs[0].Unmap().String() != "127.0.0.1" {
		t.Skipf("localhost does not resolve to 127.0.0.1 first here (%v, %v)", addrs, err)
	}
}

// sortAfterGotConn sorts the hooks after the first GotConn.
func sortAfterGotConn(lines []string) []string {
	out := slices.Clone(lines)
	for i, l := range out {
		if strings.HasPrefix(l, "GotConn") {
			slices.Sort(out[i+1:])
			break
		}
	}
	return out
}

// TestH3TraceCancelledWhileWaiting: the request that started the QUIC dial
// is cancelled while it waits; the dial phases open for it end with the
// context's error before RoundTrip returns, and nothing else follows.
func TestH3TraceCancelledWhileWaiting(t *testing.T) {
	u := startTLS(t, &protoHandler{})
	tr := newH3Transport(t, func(tr *Transport) {
		tr.h3.headStart = time.Minute
		tr.h3.handshakeTimeout = time.Minute
	})
	advertise(t, tr.altSvcCache(), u, altValue("", blackholeUDP(t)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &hookRecorder{onTLSStart: cancel}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, rec.trace()), "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("cancelled request answered over %s", resp.Proto)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	want := seq("GetConn", quicFailedHooks)
	if got := rec.lines(); !slices.Equal(got, want) {
		t.Fatalf("hooks:\n got  %s\n want %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	for _, e := range rec.errors() {
		if !errors.Is(e, context.Canceled) {
			t.Fatalf("Done hook error %v, want context.Canceled", e)
		}
	}
}
