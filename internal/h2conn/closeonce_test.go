package h2conn

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCloseOnceUnderConcurrentRelease: the caller's Close returns nil, a
// second Close too, and the slot is free and the connection usable after
// them, whether the body was read to its end or not, with or without a
// request body.
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
		if _, idle := c.IdleSince(); !idle {
			t.Errorf("%s: slot still in use after Close", tc.name)
		}
		if !c.Usable() {
			t.Errorf("%s: connection unusable after Close", tc.name)
		}
	}
}
