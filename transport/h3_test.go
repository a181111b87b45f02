package transport

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/altsvc"
)

// TestH3UpgradeAfterAltSvc: the first request goes over TCP and learns the
// server's Alt-Svc; the QUIC handshake starts at once in the background, and
// once it is done the next request goes over HTTP/3.0 to the same origin.
func TestH3UpgradeAfterAltSvc(t *testing.T) {
	h := &protoHandler{}
	u := startWrapped(t, h)
	tr := newH3Transport(t, nil)

	resp, body := fetch(t, tr, "GET", u, nil)
	if !isTCPProto(resp.Proto) || resp.Header.Get("Alt-Svc") == "" {
		t.Fatalf("first request: proto %s, Alt-Svc %q; want TCP with Alt-Svc", resp.Proto, resp.Header.Get("Alt-Svc"))
	}
	if _, ok := tr.altSvcCache().Usable(originOf(t, u), "h3"); !ok {
		t.Fatal("the response's Alt-Svc did not reach the cache")
	}
	eventually(t, "the background QUIC handshake", func() bool { return h3Ready(t, tr, u) })
	resp, body = fetch(t, tr, "GET", u, nil)
	if resp.Proto != "HTTP/3.0" || !strings.HasPrefix(body, "HTTP/3.0") {
		t.Fatalf("second request: proto %s, body %q; want HTTP/3.0 both sides", resp.Proto, body)
	}
	if resp.Request == nil || resp.Request.URL.String() != u || resp.TLS == nil {
		t.Fatal("resp.Request or resp.TLS not set for HTTP/3")
	}
	if n := tr.h3.waits.Load(); n != 0 {
		t.Fatalf("%d requests waited for QUIC; the handshake ran before they needed it", n)
	}
}

// TestH3FirstRequestWaitsForQUIC: with nothing pooled, a request to an
// origin whose alternative is known gives QUIC its head start and goes
// over HTTP/3.0 (the head start is long here so the outcome is certain).
// The request starts the QUIC dial and then waits for it, unless the
// handshake over loopback already finished in between (seen once in 50
// runs on a loaded machine): at most one wait, and HTTP/3 either way,
// where a request that did not wait would have gone over TCP.
func TestH3FirstRequestWaitsForQUIC(t *testing.T) {
	u := startWrapped(t, &protoHandler{})
	tr := newH3Transport(t, func(tr *Transport) { tr.h3.headStart = time.Minute })
	port := originOf(t, u).Port()
	advertise(t, tr.altSvcCache(), u, altValue("", port))
	resp, _ := fetch(t, tr, "GET", u, nil)
	if resp.Proto != "HTTP/3.0" {
		t.Fatalf("proto %s, want HTTP/3.0", resp.Proto)
	}
	if n := tr.h3.waits.Load(); n > 1 {
		t.Fatalf("%d waits for QUIC, want at most 1", n)
	}
}

// TestH3RequestFeatures: bodies, trailers, gzip, header limits, tracing and
// timeouts behave over HTTP/3 as over TCP.
func TestH3RequestFeatures(t *testing.T) {
	h := &protoHandler{}
	h.extra = func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/gzip":
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				io.WriteString(w, "no gzip asked")
				return true
			}
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, "zipped "+r.Proto)
			zw.Close()
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "body")
			w.Header().Set("X-Sum", "42")
		case "/bigheader":
			w.Header().Set("X-Big", strings.Repeat("a", 8<<10))
		case "/slow":
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
			}
		case "/continue":
			if r.Header.Get("X-Refuse") != "" {
				w.WriteHeader(http.StatusExpectationFailed)
				return true
			}
			w.WriteHeader(http.StatusContinue)
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, "got "+string(b))
		default:
			return false
		}
		return true
	}
	u := startWrapped(t, h)
	port := originOf(t, u).Port()
	newTr := func(mod func(*Transport)) *Transport {
		tr := newH3Transport(t, func(tr *Transport) {
			tr.h3.headStart = time.Minute
			if mod != nil {
				mod(tr)
			}
		})
		advertise(t, tr.altSvcCache(), u, altValue("", port))
		return tr
	}

	t.Run("post_body", func(t *testing.T) {
		tr := newTr(nil)
		resp, body := fetch(t, tr, "POST", u, strings.NewReader("payload"))
		if resp.Proto != "HTTP/3.0" || body != "HTTP/3.0 payload" {
			t.Fatalf("%s %q", resp.Proto, body)
		}
	})
	t.Run("gzip", func(t *testing.T) {
		tr := newTr(nil)
		resp, body := fetch(t, tr, "GET", u+"/gzip", nil)
		if resp.Proto != "HTTP/3.0" || body != "zipped HTTP/3.0" || !resp.Uncompressed {
			t.Fatalf("%s %q uncompressed=%v", resp.Proto, body, resp.Uncompressed)
		}
	})
	t.Run("disable_compression", func(t *testing.T) {
		tr := newTr(func(tr *Transport) { tr.DisableCompression = true })
		resp, body := fetch(t, tr, "GET", u+"/gzip", nil)
		if resp.Proto != "HTTP/3.0" || body != "no gzip asked" {
			t.Fatalf("%s %q", resp.Proto, body)
		}
	})
	t.Run("trailer", func(t *testing.T) {
		tr := newTr(nil)
		resp, body := fetch(t, tr, "GET", u+"/trailer", nil)
		if resp.Proto != "HTTP/3.0" || body != "body" || resp.Trailer.Get("X-Sum") != "42" {
			t.Fatalf("%s %q trailer %v", resp.Proto, body, resp.Trailer)
		}
	})
	t.Run("max_response_header_bytes", func(t *testing.T) {
		tr := newTr(func(tr *Transport) { tr.MaxResponseHeaderBytes = 1 << 10 })
		req, _ := http.NewRequest("GET", u+"/bigheader", nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
			t.Fatalf("%s response with an 8 KiB header under a 1 KiB limit", resp.Proto)
		}
	})
	t.Run("response_header_timeout", func(t *testing.T) {
		tr := newTr(func(tr *Transport) { tr.ResponseHeaderTimeout = 50 * time.Millisecond })
		fetch(t, tr, "GET", u, nil) // the connection is up: the timeout is the server's
		req, _ := http.NewRequest("GET", u+"/slow", nil)
		_, err := tr.RoundTrip(req)
		if !isTimeout(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want a timeout", err)
		}
	})
	t.Run("request_cancel_channel", func(t *testing.T) {
		tr := newTr(nil)
		fetch(t, tr, "GET", u, nil)
		cancel := make(chan struct{})
		req, _ := http.NewRequest("GET", u+"/slow", nil)
		req.Cancel = cancel
		time.AfterFunc(20*time.Millisecond, func() { close(cancel) })
		if _, err := tr.RoundTrip(req); err != errRequestCanceled {
			t.Fatalf("err = %v, want %v", err, errRequestCanceled)
		}
	})
	t.Run("context_cancel", func(t *testing.T) {
		tr := newTr(nil)
		fetch(t, tr, "GET", u, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", u+"/slow", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("expect_continue", func(t *testing.T) {
		tr := newTr(func(tr *Transport) { tr.ExpectContinueTimeout = time.Minute })
		var got100, waited atomic.Bool
		trace := &httptrace.ClientTrace{
			Wait100Continue: func() { waited.Store(true) },
			Got100Continue:  func() { got100.Store(true) },
		}
		req, _ := http.NewRequest("PUT", u+"/continue", strings.NewReader("late body"))
		req.Header.Set("Expect", "100-continue")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "got late body" || !got100.Load() || !waited.Load() {
			t.Fatalf("body %q, Got100Continue %v, Wait100Continue %v", b, got100.Load(), waited.Load())
		}
	})
	t.Run("expect_continue_refused", func(t *testing.T) {
		tr := newTr(func(tr *Transport) { tr.ExpectContinueTimeout = time.Minute })
		body := &readCounter{r: strings.NewReader("never sent")}
		req, _ := http.NewRequest("PUT", u+"/continue", body)
		req.ContentLength = 10
		req.Header.Set("Expect", "100-continue")
		req.Header.Set("X-Refuse", "1")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusExpectationFailed || resp.Proto != "HTTP/3.0" || body.reads.Load() != 0 {
			t.Fatalf("status %d %s, body read %d times; want 417 over h3, body unread", resp.StatusCode, resp.Proto, body.reads.Load())
		}
	})
	t.Run("trace_hooks", func(t *testing.T) {
		tr := newTr(nil)
		fetch(t, tr, "GET", u, nil)
		var mu sync.Mutex
		var events []string
		add := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
		trace := &httptrace.ClientTrace{
			GetConn:              func(string) { add("GetConn") },
			GotConn:              func(i httptrace.GotConnInfo) { add("GotConn reused=" + boolStr(i.Reused)) },
			WroteHeaders:         func() { add("WroteHeaders") },
			WroteRequest:         func(httptrace.WroteRequestInfo) { add("WroteRequest") },
			GotFirstResponseByte: func() { add("GotFirstResponseByte") },
		}
		req, _ := http.NewRequest("GET", u, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		got := strings.Join(events, ",")
		mu.Unlock()
		want := "GetConn,GotConn reused=true,WroteHeaders,WroteRequest,GotFirstResponseByte"
		if got != want {
			t.Fatalf("trace %s\nwant  %s", got, want)
		}
	})
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

type readCounter struct {
	r     io.Reader
	reads atomic.Int32
}

func (c *readCounter) Read(p []byte) (int, error) { c.reads.Add(1); return c.r.Read(p) }

// TestH3AltSvcClear: `clear` from the server (here over HTTP/3 itself)
// removes the alternative, and the next request goes over TCP.
func TestH3AltSvcClear(t *testing.T) {
	h := &protoHandler{}
	port, _ := startH3(t, h, nil)
	h.setAltSvc(altValue("", port))
	u := startTLS(t, h)
	tr := newH3Transport(t, nil)
	fetch(t, tr, "GET", u, nil)
	eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
	h.setAltSvc("clear")
	if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
		t.Fatalf("proto %s before clear took effect, want HTTP/3.0", resp.Proto)
	}
	if resp, _ := fetch(t, tr, "GET", u, nil); !isTCPProto(resp.Proto) {
		t.Fatalf("proto %s after clear, want TCP", resp.Proto)
	}
	if n := len(tr.altSvcCache().Lookup(originOf(t, u), nil)); n != 0 {
		t.Fatalf("%d alternatives left after clear", n)
	}
}

// TestH3AltSvcExpiry: an alternative is used until its ma runs out on the
// cache's (injected) clock, then requests go back to TCP.
func TestH3AltSvcExpiry(t *testing.T) {
	clock := newFakeClock()
	h := &protoHandler{tcpOnly: true}
	port, _ := startH3(t, h, nil)
	u := startTLS(t, h)
	h.setAltSvc(strings.Replace(altValue("", port), "ma=3600", "ma=60", 1))
	tr := newH3Transport(t, func(tr *Transport) { tr.AltSvc = altsvc.New(altsvc.Options{Clock: clock.now}) })
	fetch(t, tr, "GET", u, nil)
	eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
	clock.advance(59 * time.Second)
	if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
		t.Fatalf("proto %s within ma, want HTTP/3.0", resp.Proto)
	}
	clock.advance(2 * time.Second)
	if resp, _ := fetch(t, tr, "GET", u, nil); !isTCPProto(resp.Proto) {
		t.Fatalf("proto %s after ma expired, want TCP", resp.Proto)
	}
}

// TestH3AlternativeElsewhere: the alternative may name another port and
// another host; the connection goes there while TLS verifies the origin's
// name and the request's authority stays the origin.
func TestH3AlternativeElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name, originHost, altHost string
	}{
		{"other_port", "127.0.0.1", ""},
		{"ip_for_named_origin", "localhost", "127.0.0.1"},
		{"name_for_ip_origin", "127.0.0.1", "localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.altHost == "localhost" {
				addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", "localhost")
				if err != nil || len(addrs) == 0 || addrs[0].Unmap().String() != "127.0.0.1" {
					t.Skipf("localhost does not resolve to 127.0.0.1 first here (%v, %v)", addrs, err)
				}
			}
			var authority atomic.Value
			h := &protoHandler{extra: func(w http.ResponseWriter, r *http.Request) bool {
				if r.ProtoMajor == 3 {
					authority.Store(r.Host)
				}
				return false
			}}
			port, _ := startH3(t, h, nil)
			h.setAltSvc(altValue(tc.altHost, port))
			u := strings.Replace(startTLS(t, h), "127.0.0.1", tc.originHost, 1)
			tr := newH3Transport(t, nil)
			fetch(t, tr, "GET", u, nil)
			eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
			resp, _ := fetch(t, tr, "GET", u, nil)
			if resp.Proto != "HTTP/3.0" {
				t.Fatalf("proto %s, want HTTP/3.0", resp.Proto)
			}
			if got, want := authority.Load(), strings.TrimPrefix(u, "https://"); got != want {
				t.Fatalf(":authority %v, want the origin %s", got, want)
			}
		})
	}
}

// TestH3CloneAndSharedCache: Clone keeps a user's AltSvc cache and
// DisableHTTP3; a private cache is never shared by a clone.
func TestH3CloneAndSharedCache(t *testing.T) {
	shared := altsvc.New(altsvc.Options{})
	tr := &Transport{AltSvc: shared, DisableHTTP3: true}
	if c := tr.Clone(); c.AltSvc != shared || !c.DisableHTTP3 {
		t.Fatalf("Clone: AltSvc %p DisableHTTP3 %v; want %p true", c.AltSvc, c.DisableHTTP3, shared)
	}
	private := &Transport{}
	clone := private.Clone()
	if private.altSvcCache() == clone.altSvcCache() || clone.AltSvc != nil {
		t.Fatal("a Transport and its clone share a private Alt-Svc cache")
	}
	if tr.altSvcCache() != shared {
		t.Fatal("the Transport does not use its AltSvc cache")
	}
}

// getInBackground sends GET url through rt from a goroutine and reports
// "<proto> <body>", or the error text, on the returned channel.
func getInBackground(rt http.RoundTripper, url string) <-chan string {
	out := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", url, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			out <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out <- resp.Proto + " " + string(b)
	}()
	return out
}
