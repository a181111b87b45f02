package transport

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The deprecated CancelRequest under concurrency: 100 requests wait for
// their response head (or read a body that never ends) at the same time,
// and each is cancelled once with CancelRequest. The registry that maps a
// request to its connection is ferry's own; every request must end, with
// net/http's error, soon after its cancel, and the Transport must be clean
// afterwards. Over HTTP/3 too (ferry cancels HTTP/3 requests as HTTP/1.1
// ones; net/http has no HTTP/3).

func TestCancelRequestStorm(t *testing.T) {
	const n = 100
	for _, proto := range []string{"h1", "h3"} {
		for _, phase := range []string{"head", "body"} {
			for _, side := range []string{"nethttp", "ferry"} {
				t.Run(proto+"/"+phase+"/"+side, func(t *testing.T) {
					if proto == "h3" && side == "nethttp" {
						t.Skip("net/http does not speak HTTP/3")
					}
					stressLeakCheck(t, func(t *testing.T) { stressCancelRequestStorm(t, proto, phase, side, n) })
				})
			}
		}
	}
}

func stressCancelRequestStorm(t *testing.T, proto, phase, side string, n int) {
	var arrived atomic.Int32
	release := make(chan struct{})
	h := stormHandler(release)
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/head" {
			arrived.Add(1)
		}
		h(w, r)
	})
	var u string
	if proto == "h3" {
		u = startWrapped(t, counting)
	} else {
		u = startTLS(t, counting)
	}
	t.Cleanup(func() { close(release) }) // before the servers close
	std := &http.Transport{TLSClientConfig: h3Cert(t).ClientConfig(), MaxIdleConnsPerHost: n}
	var rt interface {
		http.RoundTripper
		CancelRequest(*http.Request)
	} = std
	var tr *Transport
	if side == "ferry" {
		tr = From(std)
		rt = tr
	}
	defer closeIdle(rt)
	if proto == "h3" {
		stressFinalGet(t, rt, u+"/fast")
		eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
	}
	wantProto := map[string]string{"h1": "HTTP/1.1", "h3": "HTTP/3.0"}[proto]
	if p := stressFinalGet(t, rt, u+"/fast"); p != wantProto {
		t.Fatalf("spoke %s, want %s", p, wantProto)
	}

	reqs := make([]*http.Request, n)
	ready := make([]chan struct{}, n) // closed once request i may be cancelled
	readyOnce := make([]sync.Once, n)
	markReady := func(i int) { readyOnce[i].Do(func() { close(ready[i]) }) }
	errs := make([]error, n)
	ends := make([]time.Time, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		// A hang guard only: the cancel must come long before.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		reqs[i], _ = http.NewRequestWithContext(ctx, "GET", u+"/"+phase, nil)
		ready[i] = make(chan struct{})
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { ends[i] = time.Now() }()
			resp, err := rt.RoundTrip(reqs[i])
			if err != nil {
				markReady(i)
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, 5)
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				markReady(i)
				errs[i] = err
				return
			}
			markReady(i) // reading the body: cancel now
			_, errs[i] = io.ReadAll(resp.Body)
		}(i)
	}
	if phase == "head" {
		eventually(t, "every request at the server", func() bool { return arrived.Load() == int32(n) })
		for i := range ready {
			markReady(i)
		}
	}
	cancelled := make([]time.Time, n)
	var cwg sync.WaitGroup
	for i := 0; i < n; i++ {
		cwg.Add(1)
		go func(i int) {
			defer cwg.Done()
			<-ready[i]
			cancelled[i] = time.Now()
			rt.CancelRequest(reqs[i])
		}(i)
	}
	cwg.Wait()
	wg.Wait()
	texts := map[string]int{}
	for i, err := range errs {
		if err == nil {
			t.Errorf("%s: request %d succeeded", side, i)
			continue
		}
		texts[normalizeErr(err)]++
		if late := ends[i].Sub(cancelled[i]); late > 5*time.Second {
			t.Errorf("%s: request %d returned %v after CancelRequest", side, i, late)
		}
	}
	t.Logf("%s: %v", side, texts)
	if p := stressFinalGet(t, rt, u+"/fast"); p != wantProto {
		t.Errorf("after the storm: %s", p)
	}
	if tr != nil {
		stressPoolEmpty(t, tr)
	}
}
