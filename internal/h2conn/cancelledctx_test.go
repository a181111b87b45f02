package h2conn

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestCancelledContextSendsNothing: a RoundTrip whose context is done
// before it starts fails with the context's error and sends nothing, as
// net/http. The connection once sent the HEADERS and cancelled the stream
// from the context's AfterFunc, on a goroutine of its own: a quick
// response then beat the cancellation and RoundTrip returned it
// (TestCancelOneStream failing about 1 in 5). The server counts the
// HEADERS it reads, in order: once the next request is answered, the
// cancelled one would have been counted.
func TestCancelledContextSendsNothing(t *testing.T) {
	srv := testpeer.StartH2(t, testpeer.H2Script{
		OnHeaders: func(_, _ int, fr *http2.Framer, id uint32) error { return testpeer.H2OK(fr, id) },
	})
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	url := "http://" + srv.Addr() + "/"
	if b := readAllResp(t, c, newRequest(t, "GET", url, nil)); b != "ok" {
		t.Fatalf("first response %q", b)
	}
	for i := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.RoundTrip(newRequest(t, "GET", url, nil).WithContext(ctx)); !errors.Is(err, context.Canceled) || IsRetryable(err) {
			t.Fatalf("round %d: err %v, want context.Canceled, not retryable", i, err)
		}
		if b := readAllResp(t, c, newRequest(t, "GET", url, nil)); b != "ok" {
			t.Fatalf("round %d: response %q", i, b)
		}
		if _, streams := srv.Counts(); streams != i+2 {
			t.Fatalf("round %d: the server read %d requests, want %d: the cancelled one went out", i, streams, i+2)
		}
	}
}

// readAllResp sends req on c and returns the response body read to its end.
func readAllResp(t *testing.T, c *Conn, req *http.Request) string {
	t.Helper()
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, resp)
}
