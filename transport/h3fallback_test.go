package transport

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// TestH3WrongCertificate: an alternative whose certificate does not verify
// for the origin host fails the alternative (marked broken) and never the
// request, which goes over TCP; the user's TLS settings are untouched.
func TestH3WrongCertificate(t *testing.T) {
	untrusted, err := selfsigned.New()
	if err != nil {
		t.Fatal(err)
	}
	otherName, err := selfsigned.New("other.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cert *selfsigned.Cert
		// waiting: no TCP connection at hand, so the request waits for the
		// QUIC dial and must fall back when it fails.
		waiting bool
	}{
		{"untrusted_learned", untrusted, false},
		{"untrusted_waiting", untrusted, true},
		{"trusted_for_another_name", otherName, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &protoHandler{}
			port, _ := startH3(t, h, tc.cert)
			h.setAltSvc(altValue("", port))
			u := startTLS(t, h)
			tr := newH3Transport(t, func(tr *Transport) {
				tr.h3.headStart = time.Minute
				// Trust the alternative's CA too: only the name may fail.
				cfg := h3Cert(t).ClientConfig()
				cfg.RootCAs.AddCert(otherName.Leaf)
				tr.TLSClientConfig = cfg
			})
			if tc.waiting {
				advertise(t, tr.altSvcCache(), u, altValue("", port))
			}
			resp, _ := fetch(t, tr, "GET", u, nil)
			if !isTCPProto(resp.Proto) {
				t.Fatalf("proto %s, want TCP", resp.Proto)
			}
			eventually(t, "the alternative marked broken", func() bool { return brokenAlt(t, tr, u, port) })
			if _, ok := tr.altSvcCache().Usable(originOf(t, u), "h3"); ok {
				t.Fatal("a broken alternative is still usable")
			}
			if resp, _ := fetch(t, tr, "GET", u, nil); !isTCPProto(resp.Proto) {
				t.Fatalf("second request: proto %s, want TCP", resp.Proto)
			}
			if n := len(h.h3Remotes()); n != 0 {
				t.Fatalf("%d requests reached the alternative", n)
			}
		})
	}
}

// TestH3UDPBlackhole: UDP is dropped. The first request, with nothing
// pooled, waits for the head start once and succeeds over TCP; the next
// one does not wait; once the dial gives up the alternative is broken.
// Latency is only checked loosely here (BenchmarkH3Fallback measures it).
func TestH3UDPBlackhole(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp_http1", true: "tcp_http2"}[h2], func(t *testing.T) { testBlackhole(t, h2) })
	}
}

func testBlackhole(t *testing.T, h2 bool) {
	port := blackholeUDP(t)
	h := &protoHandler{}
	h.setAltSvc(altValue("", port))
	u := startTLSProto(t, h, h2)
	tr := newH3Transport(t, func(tr *Transport) {
		tr.h3.handshakeTimeout = 500 * time.Millisecond
		tr.ForceAttemptHTTP2 = h2
	})
	wantProto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]
	advertise(t, tr.altSvcCache(), u, altValue("", port))

	start := time.Now()
	resp, _ := fetch(t, tr, "GET", u, nil)
	if d := time.Since(start); resp.Proto != wantProto || d > 5*time.Second {
		t.Fatalf("first request: proto %s after %v; want %s within 5s", resp.Proto, d, wantProto)
	}
	if n := tr.h3.waits.Load(); n != 1 {
		t.Fatalf("%d waits for QUIC after the first request, want 1", n)
	}
	for i := 0; i < 3; i++ {
		if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != wantProto {
			t.Fatalf("request %d: proto %s, want %s", i+2, resp.Proto, wantProto)
		}
	}
	if n := tr.h3.waits.Load(); n != 1 {
		t.Fatalf("later requests waited for QUIC (%d waits in all, want 1)", n)
	}
	eventually(t, "the alternative marked broken", func() bool { return brokenAlt(t, tr, u, port) })
	tr.CloseIdleConnections()
	// A fresh Transport sharing the cache pays nothing while the mark lasts.
	tr2 := newH3Transport(t, func(t2 *Transport) { t2.AltSvc = tr.altSvcCache() })
	if resp, _ := fetch(t, tr2, "GET", u, nil); !isTCPProto(resp.Proto) || tr2.h3.waits.Load() != 0 {
		t.Fatalf("with the alternative broken: proto %s, %d waits; want TCP, none", resp.Proto, tr2.h3.waits.Load())
	}
}

// TestH3ServerGoAway: the HTTP/3 server shuts down gracefully (GOAWAY)
// while requests run; every request succeeds, over HTTP/3 or TCP.
func TestH3ServerGoAway(t *testing.T) {
	release := make(chan struct{})
	h := &protoHandler{extra: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/hold" {
			<-release
		}
		return false
	}}
	port, h3srv := startH3(t, h, nil)
	h.setAltSvc(altValue("", port))
	u := startTLS(t, h)
	tr := newH3Transport(t, func(tr *Transport) { tr.h3.handshakeTimeout = 500 * time.Millisecond })
	fetch(t, tr, "GET", u, nil)
	eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })

	held := getInBackground(tr, u+"/hold")
	eventually(t, "the held request at the server", func() bool { return len(h.h3Remotes()) > 0 })
	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownDone <- h3srv.Shutdown(ctx)
	}()
	for i := 0; i < 5; i++ {
		resp, body := fetch(t, tr, "GET", u, nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(body, resp.Proto) {
			t.Fatalf("request %d during GOAWAY: %d %q", i, resp.StatusCode, body)
		}
	}
	close(release)
	if got := <-held; got != "HTTP/3.0 HTTP/3.0 " {
		t.Fatalf("held request: %q, want it completed over HTTP/3", got)
	}
	<-shutdownDone
	resp, _ := fetch(t, tr, "GET", u, nil)
	if !isTCPProto(resp.Proto) {
		t.Fatalf("after the HTTP/3 server left: proto %s, want TCP", resp.Proto)
	}
}

// TestH3ConcurrentSwitch: 64 requests start together just after the
// alternative was learnt; all succeed, one QUIC connection is made, and
// afterwards requests go over HTTP/3.
func TestH3ConcurrentSwitch(t *testing.T) {
	h := &protoHandler{}
	u := startWrapped(t, h)
	tr := newH3Transport(t, func(tr *Transport) { tr.MaxIdleConnsPerHost = 64 })
	fetch(t, tr, "GET", u, nil)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", u, strings.NewReader("x"))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != resp.Proto+" x" {
				errs <- resp.Proto + ": " + string(b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
	if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
		t.Fatalf("after the switch: proto %s", resp.Proto)
	}
	if n := len(h.h3Remotes()); n != 1 {
		t.Fatalf("%d QUIC connections reached the server, want 1", n)
	}
}

// TestH3NotUsed: the cases in which Alt-Svc must not lead to HTTP/3.
func TestH3NotUsed(t *testing.T) {
	h := &protoHandler{}
	u := startWrapped(t, h)
	for _, tc := range []struct {
		name       string
		mod        func(*Transport)
		cacheEmpty bool // the Alt-Svc header is not even recorded
	}{
		{"DisableHTTP3", func(tr *Transport) { tr.DisableHTTP3 = true }, true},
		{"DisableKeepAlives", func(tr *Transport) { tr.DisableKeepAlives = true }, false},
		{"DialContext", func(tr *Transport) { tr.DialContext = (&net.Dialer{}).DialContext }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newH3Transport(t, tc.mod)
			for i := 0; i < 3; i++ {
				if resp, _ := fetch(t, tr, "GET", u, nil); !isTCPProto(resp.Proto) {
					t.Fatalf("request %d: proto %s, want TCP", i, resp.Proto)
				}
			}
			if got := tr.altSvcCache().Len() == 0; got != tc.cacheEmpty {
				t.Fatalf("cache empty = %v, want %v", got, tc.cacheEmpty)
			}
			if _, open := h3State(tr); open {
				t.Fatal("a QUIC dialer was opened")
			}
		})
	}
	t.Run("cleartext_alt_svc_ignored", func(t *testing.T) {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Alt-Svc", `h3=":443"; ma=3600`)
		}))
		defer hs.Close()
		tr := newH3Transport(t, nil)
		fetch(t, tr, "GET", hs.URL, nil)
		if n := tr.altSvcCache().Len(); n != 0 {
			t.Fatalf("%d origins cached from a cleartext response", n)
		}
	})
}

// TestH3NetworkChanged: NetworkChanged forgets alternatives without
// persist=1 and broken marks, and closes idle connections, HTTP/3 included.
func TestH3NetworkChanged(t *testing.T) {
	for _, persist := range []bool{false, true} {
		name := map[bool]string{false: "not_persistent", true: "persistent"}[persist]
		t.Run(name, func(t *testing.T) {
			h := &protoHandler{}
			port, _ := startH3(t, h, nil)
			value := altValue("", port)
			if persist {
				value += "; persist=1"
			}
			h.setAltSvc(value)
			u := startTLS(t, h)
			tr := newH3Transport(t, nil)
			fetch(t, tr, "GET", u, nil)
			eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
			if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
				t.Fatalf("proto %s before the change", resp.Proto)
			}
			tr.NetworkChanged()
			if n, open := h3State(tr); n != 0 || open {
				t.Fatalf("after NetworkChanged: %d HTTP/3 connections tracked, UDP socket open %v", n, open)
			}
			_, usable := tr.altSvcCache().Usable(originOf(t, u), "h3")
			if usable != persist {
				t.Fatalf("alternative usable after the change = %v, want %v", usable, persist)
			}
		})
	}
}
