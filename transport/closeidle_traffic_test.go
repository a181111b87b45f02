package transport

import (
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CloseIdleConnections and NetworkChanged called over and over while 16
// goroutines send non-replayable POSTs (an error on a connection closed
// under a request would surface; it could not be retried away) over
// HTTP/1.1, HTTP/2 and HTTP/3. Closing idle connections must never touch
// one in use: every request succeeds, and the Transport is clean
// afterwards.

func TestCloseIdleDuringTraffic(t *testing.T) {
	for _, proto := range []string{"h1", "h2", "h3"} {
		for _, what := range []string{"CloseIdleConnections", "NetworkChanged"} {
			t.Run(proto+"/"+what, func(t *testing.T) {
				stressLeakCheck(t, func(t *testing.T) { stressCloseIdleDuringTraffic(t, proto, what) })
			})
		}
	}
}

func stressCloseIdleDuringTraffic(t *testing.T, proto, what string) {
	const workers, perWorker = 16, 50
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	var u string
	switch proto {
	case "h1":
		u = startTLSProto(t, echo, false)
	case "h2":
		u = startTLSProto(t, echo, true)
	case "h3":
		u = startWrapped(t, echo)
	}
	tr := From(&http.Transport{TLSClientConfig: h3Cert(t).ClientConfig(), ForceAttemptHTTP2: proto != "h1"})
	tr.DisableHTTP3 = proto != "h3"
	defer tr.CloseIdleConnections()
	wantProto := map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2.0", "h3": "HTTP/3.0"}[proto]
	if proto == "h3" {
		fetch(t, tr, "GET", u, nil)
		eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
	}

	stop := make(chan struct{})
	var closer sync.WaitGroup
	var calls atomic.Int32
	closer.Add(1)
	go func() {
		defer closer.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if what == "NetworkChanged" {
				tr.NetworkChanged()
			} else {
				tr.CloseIdleConnections()
			}
			calls.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	var protos sync.Map
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for i := 0; i < perWorker; i++ {
				payload := strings.Repeat("q", 1+rng.IntN(3000))
				proto, b, err := stressEchoPost(tr, u, payload)
				if err != nil || b != payload {
					t.Errorf("worker %d request %d: %d bytes, %v", w, i, len(b), err)
					return
				}
				protos.Store(proto, true)
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	closer.Wait()
	seen := []string{}
	protos.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
	t.Logf("%d %s calls; protocols %v; %+v", calls.Load(), what, seen, tr.Stats().Conns)
	if proto != "h3" && (len(seen) != 1 || seen[0] != wantProto) {
		t.Errorf("protocols %v, want %s only", seen, wantProto)
	}
	stressPoolEmpty(t, tr)
}
