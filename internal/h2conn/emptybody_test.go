package h2conn

import (
	"io"
	"net/http"
	"testing"
)

// TestEmptyBodyVerdictsRemembered: a HEAD's and a 204's response releases
// its slot at once (twice in a row too), a GET's holds it until the body
// ends, in any order. Each request's slot must be back before the next
// one, or the count would grow.
func TestEmptyBodyVerdictsRemembered(t *testing.T) {
	s := startServer(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/204" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		io.WriteString(w, "hello")
	}))
	c := newConn(t, s, Config{})
	for i, tc := range []struct {
		method, path string
		empty        bool
	}{
		{"GET", "/x", false}, {"GET", "/x", false}, {"HEAD", "/x", true},
		{"HEAD", "/x", true}, {"GET", "/x", false}, {"GET", "/204", true},
		{"GET", "/x", false},
	} {
		if !c.ReserveStream() {
			t.Fatalf("request %d: no stream on an idle conn", i)
		}
		resp, err := c.RoundTrip(newRequest(t, tc.method, s.url(tc.path), nil))
		if err != nil {
			t.Fatalf("request %d (%s %s): %v", i, tc.method, tc.path, err)
		}
		if _, idle := c.IdleSince(); idle != tc.empty {
			t.Fatalf("request %d (%s %s): idle %v before the body is read; want %v", i, tc.method, tc.path, idle, tc.empty)
		}
		readAll(t, resp)
		if _, idle := c.IdleSince(); !idle {
			t.Fatalf("request %d: slot in use after the body was read", i)
		}
	}
}
