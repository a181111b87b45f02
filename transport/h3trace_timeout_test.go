package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestH3HeaderTimeoutKeepsCallerHooks: over HTTP/3 with
// ResponseHeaderTimeout, ferry's WroteRequest (which starts the header
// timer) replaces the caller's trace with a copy merged with its own
// (fc1c86f): the hooks of two nested caller traces still fire once each,
// as with net/http, and the header timer still starts when the caller has
// a WroteRequest of its own (a server that never answers fails the request
// with the header timeout instead of hanging until the hang guard). The
// body's writer may report WroteRequest after the answer was read (it ran
// once under load in the full suite), so the check waits for both.
func TestH3HeaderTimeoutKeepsCallerHooks(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall" {
			select {
			case <-stall:
			case <-r.Context().Done():
			}
			return
		}
		io.ReadAll(r.Body) // the whole body is sent before the answer
		io.WriteString(w, "ok")
	}), func(tr *http.Transport) { tr.ResponseHeaderTimeout = 300 * time.Millisecond })

	var mu sync.Mutex // guards counts
	counts := map[string]int{}
	wrote := make(chan string, 4) // each trace's WroteRequest
	add := func(s string) { mu.Lock(); counts[s]++; mu.Unlock() }
	traced := func(ctx context.Context, tag string) context.Context {
		return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GetConn:      func(string) { add(tag + "GetConn") },
			GotConn:      func(httptrace.GotConnInfo) { add(tag + "GotConn") },
			WroteHeaders: func() { add(tag + "WroteHeaders") },
			WroteRequest: func(httptrace.WroteRequestInfo) {
				add(tag + "WroteRequest")
				select {
				case wrote <- tag:
				default:
				}
			},
			GotFirstResponseByte: func() { add(tag + "GotFirstResponseByte") },
		})
	}
	for _, rt := range []struct {
		name string
		rt   http.RoundTripper
	}{{"nethttp", tw.ref}, {"ferry", tw.h3}} {
		t.Run("nested/"+rt.name, func(t *testing.T) {
			mu.Lock()
			clear(counts)
			mu.Unlock()
			for len(wrote) > 0 {
				<-wrote
			}
			ctx := traced(traced(context.Background(), "outer."), "inner.")
			req, err := http.NewRequestWithContext(ctx, "POST", tw.url+"/ok", strings.NewReader("body"))
			if err != nil {
				t.Fatal(err)
			}
			before := tw.sent.Load()
			resp, err := rt.rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if rt.name == "ferry" && tw.sent.Load() == before {
				t.Fatal("not sent over HTTP/3")
			}
			// The body's writer may report after the answer was read.
			for range 2 {
				select {
				case <-wrote:
				case <-time.After(10 * time.Second):
					t.Fatal("a caller's WroteRequest did not fire within 10 s")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, tag := range []string{"outer.", "inner."} {
				for _, h := range []string{"GetConn", "GotConn", "WroteHeaders", "WroteRequest", "GotFirstResponseByte"} {
					if n := counts[tag+h]; n != 1 {
						t.Errorf("%s%s fired %d times, want 1 (all: %v)", tag, h, n, counts)
					}
				}
			}
		})
	}
	t.Run("stall/ferry", func(t *testing.T) {
		guard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(traced(guard, "stall."), "GET", tw.url+"/stall", nil)
		if err != nil {
			t.Fatal(err)
		}
		before := tw.sent.Load()
		resp, err := tw.h3.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatal("a server that never answered: RoundTrip succeeded")
		}
		if tw.sent.Load() == before {
			t.Fatal("not sent over HTTP/3")
		}
		if !errors.Is(err, errHeaderTimeout) {
			t.Fatalf("RoundTrip error %v, want the response header timeout (the header timer did not start with a caller WroteRequest hook)", err)
		}
	})
}
