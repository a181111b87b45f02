package h2conn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestSlotsBeforeSettingsKeepThePeerLimit: without an OnStreamFree hook (no
// MaxConnsPerHost), every slot asked for on a new connection before the
// server's SETTINGS arrive is granted (the connection is shared at once, as
// net/http shares a new one), but once SETTINGS say 2 only 2 requests go
// out: the third ends at once with a retryable error naming the stream
// limit, and the connection stays usable (it must neither block the
// requests nor close a healthy connection).
func TestSlotsBeforeSettingsKeepThePeerLimit(t *testing.T) {
	const maxStreams = 2
	srv := startLateSettingsServer(t, maxStreams)
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range maxStreams + 1 {
		if !c.ReserveStream() {
			t.Fatalf("slot %d refused before the server's SETTINGS", i)
		}
	}
	srv.sendSettings()
	// Hang guard only: a request stuck in the connection fails the test with
	// a deadline error instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err) // the ack comes after the SETTINGS, so they were processed
	}
	results := make(chan error, maxStreams+1)
	for i := range maxStreams + 1 {
		req := newRequest(t, "GET", fmt.Sprintf("http://%s/%d", srv.Addr(), i), nil).WithContext(ctx)
		go func() {
			resp, err := c.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				err = errors.New("unexpected response")
			}
			results <- err
		}()
	}
	first := <-results
	var np *NotProcessedError
	if !errors.As(first, &np) || np.Reason != ReasonStreamLimit || !np.BodyUnread {
		t.Fatalf("first request to end: %v; want a NotProcessedError for the stream limit, body unread", first)
	}
	for i := range maxStreams {
		select {
		case <-srv.headers:
		case <-ctx.Done():
			t.Fatalf("only %d of %d requests reached the server", i, maxStreams)
		}
	}
	if !c.Usable() {
		t.Fatal("a connection at its peer's limit was given up")
	}
	if c.ReserveStream() {
		c.ReleaseStream()
		t.Fatal("slot reserved beyond the peer's limit")
	}
	cancel()
	for range maxStreams {
		if err := <-results; !errors.Is(err, context.Canceled) {
			t.Errorf("request in flight ended with %v, want context.Canceled", err)
		}
	}
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("slot leaked")
	}
}
