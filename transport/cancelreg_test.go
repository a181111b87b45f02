package transport

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCancelRegistryLists: with every request in one shard's list,
// unlinking the head, a middle entry and the tail keeps the others
// findable, CancelRequest reaches exactly the request it names, and an
// unknown or unregistered request is a no-op.
func TestCancelRegistryLists(t *testing.T) {
	var r cancelRegistry
	const n = 40
	reqs := make([]*http.Request, n)
	entries := make([]*cancelEntry, n)
	stopped := make([]error, n)
	for i := range reqs {
		// Keep only requests that land in the first one's shard.
		for reqs[i] = (&http.Request{}); r.shard(reqs[i]) != r.shard(reqs[0]); {
			reqs[i] = &http.Request{}
		}
		i := i
		entries[i] = &cancelEntry{req: reqs[i], stop: func(err error) { stopped[i] = err }}
		r.register(entries[i])
	}
	gone := map[int]bool{n - 1: true, n / 2: true, 0: true} // head (last registered), middle, tail
	for i := range gone {
		r.unregister(entries[i])
		r.unregister(entries[i]) // twice is harmless
	}
	for i := range reqs {
		r.cancel(reqs[i])
		if want := !gone[i]; (stopped[i] == errRequestCanceled) != want {
			t.Fatalf("request %d: stop called with %v; registered %v", i, stopped[i], want)
		}
	}
	r.cancel(&http.Request{}) // never registered: nothing to do
	total := 0
	for i := range r.shards {
		for e := r.shards[i].head; e != nil; e = e.next {
			if e.next != nil && e.next.prev != e {
				t.Fatal("broken back link")
			}
			total++
		}
	}
	if total != n-len(gone) {
		t.Fatalf("%d entries linked, want %d", total, n-len(gone))
	}
}

// TestCancelRegistryConcurrent registers, cancels and unregisters from many
// goroutines at once (run with -race): every cancel issued while its
// request was registered lands, and the lists end empty.
func TestCancelRegistryConcurrent(t *testing.T) {
	var r cancelRegistry
	var landed atomic.Int64
	var wg sync.WaitGroup
	const workers, rounds = 16, 500
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				req := &http.Request{}
				ctx, stop := context.WithCancelCause(context.Background())
				e := &cancelEntry{req: req, stop: stop}
				r.register(e)
				r.cancel(req)
				r.unregister(e)
				if context.Cause(ctx) == errRequestCanceled {
					landed.Add(1)
				}
				stop(nil)
			}
		}()
	}
	wg.Wait()
	if got := landed.Load(); got != workers*rounds {
		t.Fatalf("%d of %d cancels landed", got, workers*rounds)
	}
	for i := range r.shards {
		if r.shards[i].head != nil {
			t.Fatalf("shard %d not empty", i)
		}
	}
}
