package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// failLaterCtx is a request context whose Err turns non-nil once failed is
// set, while its Done channel never closes: a request waiting for a
// connection under it is handed one (nothing cancels the wait), and then
// finds itself cancelled (connWait.end), so getConn gives the connection
// back unused (giveBack) -- deterministically, without racing a
// cancellation against the hand-off.
type failLaterCtx struct {
	context.Context
	done   chan struct{}
	failed atomic.Bool
}

func (c *failLaterCtx) Done() <-chan struct{} { return c.done }

func (c *failLaterCtx) Err() error {
	if c.failed.Load() {
		return context.Canceled
	}
	return nil
}

// TestIdleWatchGiveBack: a hidden-socket connection handed to a waiting
// request that was cancelled meanwhile goes back to the pool with the idle
// read it had: exactly one goroutine reads it (a second would read pc.br
// concurrently with the first, and leave a stale result for the next
// taker while it still reads under that taker's request), and the
// connection serves the next requests.
func TestIdleWatchGiveBack(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/a" {
				// The first response ends only when the test says so: its
				// connection cannot go idle before the waiter is set up.
				w.Header().Set("Content-Length", "6")
				io.WriteString(w, "ok ")
				w.(http.Flusher).Flush()
				<-release
				io.WriteString(w, "/a\n")
				return
			}
			io.WriteString(w, "ok "+r.URL.Path)
		}))
		defer srv.Close()
		var dials atomic.Int32
		ft := From(&http.Transport{DialContext: hidingDialer(&dials), MaxConnsPerHost: 1})
		ft.DisableHTTP3 = true
		defer ft.CloseIdleConnections()
		get := func(path string) {
			t.Helper()
			resp, err := ft.RoundTrip(newReq(t, "GET", srv.URL+path, nil))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != "ok "+path {
				t.Fatalf("%s: %q, %v", path, b, err)
			}
		}
		first, err := ft.RoundTrip(newReq(t, "GET", srv.URL+"/a", nil))
		if err != nil {
			t.Fatal(err)
		}
		ctx := &failLaterCtx{Context: context.Background(), done: make(chan struct{})}
		gaveUp := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/b", nil)
			resp, err := ft.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			gaveUp <- err
		}()
		eventually(t, "the second request queued", func() bool { return ft.Stats().Pool.Waits >= 1 })
		ctx.failed.Store(true)
		close(release)
		io.ReadAll(first.Body)
		first.Body.Close() // the connection goes idle, watched, to the waiter
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled request: %v, want context.Canceled", err)
		}
		// One read, the one the connection had when it was handed over (two
		// readers of one socket: the second waits on the first, which
		// never gets to "IO wait" for both).
		eventually(t, "exactly one idle read", func() bool { return len(idleWatchStates()) == 1 })
		awaitIdleWatchReads(t)
		for _, p := range []string{"/c", "/d", "/e"} {
			get(p)
			// The connection may go idle just after the body's end.
			eventually(t, "one idle read", func() bool { return len(idleWatchStates()) == 1 })
		}
		if n := dials.Load(); n != 1 {
			t.Fatalf("%d connections dialled, want 1", n)
		}
	})
}
