package h3conn

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"testing"
	"time"
)

// TestGot1xxHookErrorCancelsStream: a Got1xxResponse hook that returns an
// error ends the request with that error, resets the stream (the handler's
// request context ends) and gives the stream slot back; the connection
// stays usable and serves the next request.
func TestGot1xxHookErrorCancelsStream(t *testing.T) {
	handlerDone := make(chan error, 1)
	s := startH3(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hints" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		select {
		case <-r.Context().Done():
			handlerDone <- r.Context().Err()
		case <-time.After(10 * time.Second): // hang guard
			handlerDone <- errors.New("request context never ended")
		}
	}), "localhost")
	d := newTestDialer(t, s, nil)
	c := dialTest(t, d, s)
	boom := errors.New("test: no hints")
	trace := &httptrace.ClientTrace{Got1xxResponse: func(int, textproto.MIMEHeader) error { return boom }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "https://localhost/hints", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.RoundTrip(req); !errors.Is(err, boom) {
		if resp != nil {
			resp.Body.Close()
		}
		t.Fatalf("RoundTrip: %v, want the hook's error", err)
	}
	if err := <-handlerDone; err == nil || err.Error() == "request context never ended" {
		t.Fatalf("server side of the aborted request: %v", err)
	}
	if _, idle := c.IdleSince(); !idle || !c.Usable() {
		t.Fatalf("after the abort: idle %v usable %v, want both", idle, c.Usable())
	}
	req, _ = http.NewRequest("GET", "https://localhost/next", nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatalf("next request on the connection: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "ok" {
		t.Fatalf("next request: %q %v", b, err)
	}
}
