package transport

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

type retainedKey struct{}

// TestIdleConnDoesNotRetainRequest: once a request is over and its
// connection sits idle in the pool, nothing of ferry's keeps the request
// (and what its context holds) alive.
func TestIdleConnDoesNotRetainRequest(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	var freed atomic.Bool
	func() {
		payload := new([1 << 20]byte)
		runtime.AddCleanup(payload, func(f *atomic.Bool) { f.Store(true) }, &freed)
		ctx := context.WithValue(context.Background(), retainedKey{}, payload)
		if o := observe(tr, newReq(t, "GET", srv.URL, nil).WithContext(ctx)); o.Status != 200 || o.BodyErr != "" {
			t.Fatalf("GET: %+v", o)
		}
	}()
	if got := tr.Stats().Conns.IdleH1; got != 1 {
		t.Fatalf("%d idle connections, want the request's one", got)
	}
	// Cleanups run on the runtime's own goroutine after a GC finds the
	// payload unreachable; on a loaded machine (the whole suite under
	// -race, packages in parallel) that goroutine can wait its turn for a
	// while, so the bound is generous and only a real reference fails it.
	deadline := time.Now().Add(10 * time.Second)
	for !freed.Load() && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if !freed.Load() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("the finished request is still reachable while its connection is idle; goroutines:\n%s", buf)
	}
}
