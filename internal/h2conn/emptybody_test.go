package h2conn

import (
	"io"
	"net/http"
	"testing"
)

// TestEmptyBodyVerdictsRemembered: the response body types isEmptyBody
// remembers after their first sight keep their verdicts, in any order: a
// HEAD's and a 204's body is empty (twice in a row too) (the slot is released at once), a
// GET's is a stream (the slot is held until the body ends). Each request's
// slot must be back before the next one, or busy would grow. The check
// runs for every response, so it must not allocate.
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
		_, isStream := resp.Body.(*streamBody)
		c.mu.Lock()
		busy := c.busy
		c.mu.Unlock()
		if isStream == tc.empty || (busy == 0) != tc.empty {
			t.Fatalf("request %d (%s %s): stream body %v, busy %d; want empty %v", i, tc.method, tc.path, isStream, busy, tc.empty)
		}
		body := resp.Body
		if sb, ok := body.(*streamBody); ok {
			body = sb.body // x/net's own body, as RoundTrip saw it
		}
		if n := testing.AllocsPerRun(10, func() { isEmptyBody(body) }); n != 0 {
			t.Fatalf("request %d: isEmptyBody allocates %.0f times, want 0", i, n)
		}
		readAll(t, resp)
		c.mu.Lock()
		busy = c.busy
		c.mu.Unlock()
		if busy != 0 {
			t.Fatalf("request %d: busy %d after the body was read, want 0", i, busy)
		}
	}
}
