package h2conn

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// countingBody counts the Closes of the x/net body it wraps.
type countingBody struct {
	io.ReadCloser
	closes int
}

func (b *countingBody) Close() error {
	b.closes++
	return b.ReadCloser.Close()
}

// TestCloseOnceUnderConcurrentRelease: the caller's Close returns nil, a
// second Close too, and the slot is free and the connection usable after
// them. On x/net's connection its response body is closed exactly once,
// whether the stream body closed it at EOF (no request body) or the
// caller's Close does (the body was not read to its end, or a request body
// was sent).
func TestCloseOnceUnderConcurrentRelease(t *testing.T) {
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "hello")
	}))
	c := newConn(t, s, Config{})
	for _, tc := range []struct {
		name      string
		reqBody   io.Reader
		readToEOF bool
	}{
		{"no request body, read to EOF", nil, true},
		{"no request body, closed early", nil, false},
		{"request body, read to EOF", strings.NewReader("up"), true},
	} {
		if !c.ReserveStream() {
			t.Fatalf("%s: no stream", tc.name)
		}
		resp, err := c.RoundTrip(newRequest(t, "POST", s.url("/"), tc.reqBody))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// On x/net's connection the body it wraps is counted; the own
		// connection has no body underneath.
		var counted *countingBody
		if sb, ok := resp.Body.(*streamBody); ok {
			counted = &countingBody{ReadCloser: sb.body}
			sb.body = counted
		}
		if tc.readToEOF {
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "hello" {
				t.Fatalf("%s: read %q, %v", tc.name, b, err)
			}
		}
		if err := resp.Body.Close(); err != nil {
			t.Errorf("%s: Close: %v", tc.name, err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Errorf("%s: second Close: %v", tc.name, err)
		}
		// The caller's second Close is passed on, as before; the count
		// that matters is the first Close after EOF.
		want := 2
		if tc.readToEOF && tc.reqBody == nil {
			want = 1 // closed at EOF; the caller's Closes are not passed on
		}
		if counted != nil && counted.closes != want {
			t.Errorf("%s: x/net body closed %d times, want %d", tc.name, counted.closes, want)
		}
		if _, idle := c.IdleSince(); !idle {
			t.Errorf("%s: slot still in use after Close", tc.name)
		}
		if !c.Usable() {
			t.Errorf("%s: connection unusable after Close", tc.name)
		}
	}
}
