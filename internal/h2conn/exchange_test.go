package h2conn

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// Tests of the connection against net/http's HTTP/2 server over loopback,
// TLS and h2c.

func forBothTransports(t *testing.T, f func(t *testing.T, useTLS bool)) {
	t.Run("tls", func(t *testing.T) { f(t, true) })
	t.Run("h2c", func(t *testing.T) { f(t, false) })
}

func TestGetAndReuse(t *testing.T) {
	forBothTransports(t, func(t *testing.T, useTLS bool) {
		s := startServer(t, useTLS, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 {
				t.Errorf("server saw %s", r.Proto)
			}
			w.Header().Set("X-Path", r.URL.Path)
			fmt.Fprintf(w, "hello %s %s", r.Host, r.Header.Get("User-Agent"))
		}))
		c := newConn(t, s, Config{})
		for i := range 3 {
			if !c.ReserveStream() {
				t.Fatal("no stream")
			}
			resp, err := c.RoundTrip(newRequest(t, "GET", s.url(fmt.Sprintf("/p%d", i)), nil))
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, resp)
			if want := "hello " + s.addr() + " Go-http-client/2.0"; got != want || resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
				t.Fatalf("got %d %s %q, want 200 HTTP/2.0 %q", resp.StatusCode, resp.Proto, got, want)
			}
			if resp.Header.Get("X-Path") != fmt.Sprintf("/p%d", i) {
				t.Fatalf("X-Path %q", resp.Header.Get("X-Path"))
			}
			if (resp.TLS != nil) != useTLS {
				t.Fatalf("resp.TLS %v with TLS %v", resp.TLS, useTLS)
			}
		}
		if _, idle := c.IdleSince(); !idle {
			t.Fatal("connection not idle after three requests")
		}
	})
}

func TestRequestBodies(t *testing.T) {
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		fmt.Fprintf(w, "%d %d %x", r.ContentLength, len(b), sha(b))
	}))
	c := newConn(t, s, Config{})
	big := make([]byte, 3<<20) // beyond the server's initial windows
	rand.Read(big)
	for _, tc := range []struct {
		name string
		body io.Reader
		size int64
		data []byte
	}{
		{"known", bytes.NewReader(big[:1000]), 1000, big[:1000]},
		{"unknown", io.MultiReader(bytes.NewReader(big[:5000])), -1, big[:5000]},
		{"big-known", bytes.NewReader(big), int64(len(big)), big},
		{"big-unknown", io.MultiReader(bytes.NewReader(big)), -1, big},
		{"empty", http.NoBody, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, "POST", s.url("/"), tc.body)
			req.ContentLength = tc.size
			if tc.size < 0 {
				req.ContentLength = 0
				req.Body = io.NopCloser(tc.body)
			}
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, resp)
			wantLen := tc.size
			if tc.size < 0 {
				wantLen = -1
			}
			if want := fmt.Sprintf("%d %d %x", wantLen, len(tc.data), sha(tc.data)); got != want {
				t.Fatalf("server saw %q, want %q", got, want)
			}
		})
	}
}

func sha(b []byte) uint32 {
	var h uint32 = 2166136261
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

func TestLargeResponseAndConcurrency(t *testing.T) {
	big := make([]byte, 9<<20) // beyond the stream window (4 MiB)
	rand.Read(big)
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(big)
	}))
	c := newConn(t, s, Config{StrictMaxConcurrentStreams: true})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !c.ReserveStream() {
				t.Error("no stream")
				return
			}
			resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(b, big) {
				t.Errorf("body: %d bytes, %v", len(b), err)
			}
		}()
	}
	wg.Wait()
}

// TestTrailersBothWays: request trailers reach the server whether their
// values are known up front or set when the body reaches EOF, and the
// response's declared trailers are keys in resp.Trailer before the body
// is read, with their values at its EOF.
func TestTrailersBothWays(t *testing.T) {
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", "X-Out")
		w.WriteHeader(200)
		io.WriteString(w, "body")
		w.Header().Set("X-Out", "in="+r.Trailer.Get("X-In"))
	}))
	c := newConn(t, s, Config{})
	for _, tc := range []struct {
		name string
		make func() *http.Request
		want string
	}{
		{"values known up front", func() *http.Request {
			req := newRequest(t, "POST", s.url("/"), io.NopCloser(strings.NewReader("payload")))
			req.ContentLength = -1
			req.Trailer = http.Header{"X-In": {"abc"}}
			return req
		}, "in=abc"},
		{"values set at the body's EOF", func() *http.Request {
			req := newRequest(t, "POST", s.url("/"), nil)
			req.Trailer = http.Header{"X-In": nil}
			req.Body = &testpeer.TrailerBody{R: strings.NewReader("payload"), Set: func() { req.Trailer.Set("X-In", "t1") }}
			req.ContentLength = 0
			return req
		}, "in=t1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.RoundTrip(tc.make())
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := resp.Trailer["X-Out"]; !ok {
				t.Fatalf("declared trailer missing before EOF: %v", resp.Trailer)
			}
			if got := readAll(t, resp); got != "body" {
				t.Fatalf("body %q", got)
			}
			if got := resp.Trailer.Get("X-Out"); got != tc.want {
				t.Fatalf("trailer X-Out %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBodyCloseResetsOnlyItsStream(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/endless" {
			for {
				if _, err := w.Write(make([]byte, 16<<10)); err != nil {
					cancelled <- struct{}{}
					return
				}
				w.(http.Flusher).Flush()
			}
		}
		io.WriteString(w, "ok")
	}))
	c := newConn(t, s, Config{})
	resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/endless"), nil))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 100<<10))
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("server's handler never saw the reset")
	}
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after Close succeeded")
	}
	resp2, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp2); got != "ok" {
		t.Fatalf("next request: %q", got)
	}
}

func TestTraceAnd1xx(t *testing.T) {
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // sends 100 Continue
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(103)
		io.WriteString(w, "done")
	}))
	c := newConn(t, s, Config{ExpectContinueTimeout: 5 * time.Second})
	var mu sync.Mutex
	var events []string
	add := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	// WroteRequest comes from the body's writer, which may finish after
	// the whole response was read.
	wroteRequest := make(chan struct{})
	trace := &httptrace.ClientTrace{
		GotConn:              func(httptrace.GotConnInfo) { add("GotConn") },
		WroteHeaders:         func() { add("WroteHeaders") },
		Wait100Continue:      func() { add("Wait100Continue") },
		Got100Continue:       func() { add("Got100Continue") },
		WroteRequest:         func(httptrace.WroteRequestInfo) { add("WroteRequest"); close(wroteRequest) },
		GotFirstResponseByte: func() { add("GotFirstResponseByte") },
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			add(fmt.Sprintf("1xx %d %s", code, h.Get("Link")))
			return nil
		},
	}
	req := newRequest(t, "POST", s.url("/"), strings.NewReader("body"))
	req.Header.Set("Expect", "100-continue")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "done" {
		t.Fatalf("body %q", got)
	}
	<-wroteRequest
	mu.Lock()
	got := strings.Join(events, ",")
	mu.Unlock()
	// The request's hooks come first; Wait100Continue (the body's writer)
	// and the response's hooks (the reader) may interleave.
	want := "GotConn,WroteHeaders,"
	if !strings.HasPrefix(got, want) {
		t.Errorf("trace %q, want it to start %q", got, want)
	}
	for _, want := range []string{"Wait100Continue", "GotFirstResponseByte,1xx 100 ,Got100Continue", "1xx 103 </style.css>; rel=preload", "WroteRequest"} {
		if !strings.Contains(got, want) {
			t.Errorf("trace %q lacks %q", got, want)
		}
	}
}

// TestGoAwayOnIdleConnection: a server shutting down sends GOAWAY to a
// connection with no request in flight; the connection takes no new
// stream from then on, and a request sent on it gets a retryable error.
// (TestGoAwayMidFlight has a request in flight.)
func TestGoAwayOnIdleConnection(t *testing.T) {
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	c := newConn(t, s, Config{})
	resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	go s.srv.Shutdown(context.Background())
	waitFor(t, "the connection to become unusable after GOAWAY", func() bool { return !c.Usable() })
	if c.ReserveStream() {
		t.Fatal("stream reserved after GOAWAY")
	}
	_, err = c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if !IsRetryable(err) {
		t.Fatalf("err %v, want retryable", err)
	}
}
