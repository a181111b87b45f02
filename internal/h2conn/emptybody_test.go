package h2conn

import (
	"io"
	"net/http"
	"testing"
)

// TestEmptyBodyVerdictsRemembered: a HEAD's and a 204's response releases
// its slot at once (twice in a row too), a GET's holds it until the body
// ends, in any order. Each request's slot must be back before the next
// one, or the count would grow. On x/net's connection the body types
// isEmptyBody remembers after their first sight keep their verdicts, and
// the check, run for every response, must not allocate.
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
		if c.cc != nil { // x/net's connection: its bodies are sorted by type
			_, isStream := resp.Body.(*streamBody)
			if isStream == tc.empty {
				t.Fatalf("request %d (%s %s): stream body %v; want empty %v", i, tc.method, tc.path, isStream, tc.empty)
			}
			body := resp.Body
			if sb, ok := body.(*streamBody); ok {
				body = sb.body // x/net's own body, as RoundTrip saw it
			}
			if n := testing.AllocsPerRun(10, func() { isEmptyBody(body) }); n != 0 {
				t.Fatalf("request %d: isEmptyBody allocates %.0f times, want 0", i, n)
			}
		}
		readAll(t, resp)
		if _, idle := c.IdleSince(); !idle {
			t.Fatalf("request %d: slot in use after the body was read", i)
		}
	}
}
