package cancelreg

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errRequestCanceled = errors.New("net/http: request canceled")

// abortRecorder is a connection that records its aborts.
type abortRecorder struct {
	gen uint64
	err error
}

func (c *abortRecorder) Abort(gen uint64, err error) { c.gen, c.err = gen, err }

// TestCancelAbortsConnectionAtGeneration: an entry with a connection is
// cancelled through the connection's Abort, at the entry's generation,
// rather than through Stop.
func TestCancelAbortsConnectionAtGeneration(t *testing.T) {
	var r Registry[*abortRecorder]
	c := &abortRecorder{}
	req := &http.Request{}
	stopped := false
	e := &Entry[*abortRecorder]{Req: req, Conn: c, Gen: 7, Stop: func(error) { stopped = true }}
	r.Register(e)
	if !r.Registered(req) || r.Len() != 1 {
		t.Fatal("the registered request is not found")
	}
	r.Cancel(req, errRequestCanceled)
	if c.gen != 7 || c.err != errRequestCanceled || stopped {
		t.Fatalf("Abort(%d, %v), Stop called %v; want Abort(7, %v) only", c.gen, c.err, stopped, errRequestCanceled)
	}
	r.Unregister(e)
	if r.Registered(req) || r.Len() != 0 || e.Conn != nil || e.Req != nil {
		t.Fatal("Unregister left the entry linked or holding its request")
	}
}

// TestCancelRegistryLists: with every request in one shard's list,
// unlinking the head, a middle entry and the tail keeps the others
// findable, CancelRequest reaches exactly the request it names, and an
// unknown or unregistered request is a no-op.
func TestCancelRegistryLists(t *testing.T) {
	var r Registry[*abortRecorder]
	const n = 40
	reqs := make([]*http.Request, n)
	entries := make([]*Entry[*abortRecorder], n)
	stopped := make([]error, n)
	for i := range reqs {
		// Keep only requests that land in the first one's shard.
		for reqs[i] = (&http.Request{}); r.shard(reqs[i]) != r.shard(reqs[0]); {
			reqs[i] = &http.Request{}
		}
		i := i
		entries[i] = &Entry[*abortRecorder]{Req: reqs[i], Stop: func(err error) { stopped[i] = err }}
		r.Register(entries[i])
	}
	gone := map[int]bool{n - 1: true, n / 2: true, 0: true} // head (last registered), middle, tail
	for i := range gone {
		r.Unregister(entries[i])
		r.Unregister(entries[i]) // twice is harmless
	}
	for i := range reqs {
		r.Cancel(reqs[i], errRequestCanceled)
		if want := !gone[i]; (stopped[i] == errRequestCanceled) != want {
			t.Fatalf("request %d: stop called with %v; registered %v", i, stopped[i], want)
		}
	}
	r.Cancel(&http.Request{}, errRequestCanceled) // never registered: nothing to do
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
	var r Registry[*abortRecorder]
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
				e := &Entry[*abortRecorder]{Req: req, Stop: stop}
				r.Register(e)
				r.Cancel(req, errRequestCanceled)
				r.Unregister(e)
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
