package h2conn

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// heldCloseBody is a request body whose Close blocks until release is
// closed: it keeps the body writer's goroutine busy after the response
// refused the body, so nothing the writer does afterwards can be what
// the test observes.
type heldCloseBody struct {
	io.Reader
	release chan struct{}
	closed  chan struct{} // closed when Close returns
}

func (b *heldCloseBody) Close() error {
	<-b.release
	close(b.closed)
	return nil
}

// TestRefusedBodyResetPrecedesNextRequest: a request waiting for 100
// Continue that gets a final 417 instead never sends its body, and its
// stream is reset with CANCEL by the time the caller can see the response
// end: a caller that reads the 417's body to EOF (or gets a 417 that
// ended with its HEADERS) and sends its next request on the connection
// finds the RST_STREAM ahead of that request on the wire, even while the
// body writer is still busy (here: in the body's Close), so the reset
// cannot be left to the writer or to the response body's Close.
func TestRefusedBodyResetPrecedesNextRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string // the 417's body; "" ends the stream with the HEADERS
	}{
		{"with-body", "no"},
		{"head-only", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { testRefusedBodyReset(t, tc.body) })
	}
}

func testRefusedBodyReset(t *testing.T, refusal string) {
	type observed struct {
		resetsAtNext int // RST_STREAM(CANCEL)s received when the next HEADERS came
		data         int // DATA frames received by then
		ok           bool
	}
	seen := make(chan observed, 1)
	c, _ := hostileConn(t, Config{ExpectContinueTimeout: time.Minute}, testpeer.H2HostileScript{
		Serve: func(p *testpeer.H2Peer) {
			id, ok := p.NextStream(10 * time.Second)
			if !ok {
				seen <- observed{}
				return
			}
			var err error
			if refusal == "" {
				err = p.Headers(id, true, ":status", "417")
			} else if err = p.Headers(id, false, ":status", "417"); err == nil {
				err = p.Data(id, true, []byte(refusal))
			}
			if err != nil {
				seen <- observed{}
				return
			}
			next, ok := p.NextStream(10 * time.Second)
			// The reader counts each frame before it hands on a HEADERS,
			// so these are the frames that came before the next request.
			seen <- observed{p.Count("RST_STREAM CANCEL"), p.Count("DATA"), ok}
			if ok {
				p.OK(next, "plain")
			}
			<-p.Closed()
		},
	})

	body := &heldCloseBody{Reader: strings.NewReader("hello"), release: make(chan struct{}), closed: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(body.release)
		}
	}
	t.Cleanup(release)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://frames.test/upload", body)
	req.ContentLength = -1 // streamed: never sent with the HEADERS
	req.Header.Set("Expect", "100-continue")
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 417 {
		t.Fatalf("status %d, want 417", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != refusal {
		t.Fatalf("417 body %q, %v; want %q", b, err, refusal)
	}
	// The next request, before the first response's body is closed.
	next, err := getWithin(t, c, "/next")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, next); got != "plain" {
		t.Fatalf("next body %q", got)
	}
	o := <-seen
	if !o.ok {
		t.Fatal("the server did not get the next request")
	}
	if o.resetsAtNext != 1 {
		t.Errorf("RST_STREAM(CANCEL) frames before the next request: %d, want 1", o.resetsAtNext)
	}
	if o.data != 0 {
		t.Errorf("DATA frames before the next request: %d, want 0 (the body was refused)", o.data)
	}

	// The writer still closes the caller's body once it may.
	release()
	select {
	case <-body.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the request body was never closed")
	}
	resp.Body.Close()
}
