package transport

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The idle pool with a tiny IdleConnTimeout and many hosts: 16 goroutines
// send non-replayable POSTs (an error on a connection the pool closed under
// a request would surface, not be retried away) to 20 origins at random,
// pausing around the timeout between requests, so connections expire while
// others are reused. Every request must succeed; once the client goes
// quiet the pool must empty by itself (its own timer, no
// CloseIdleConnections) and release every socket.

func TestIdleExpiryManyHosts(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "h1"
		if h2 {
			name = "h2"
		}
		t.Run(name, func(t *testing.T) {
			stressLeakCheck(t, func(t *testing.T) { stressIdleExpiry(t, h2) })
		})
	}
}

func stressIdleExpiry(t *testing.T, h2 bool) {
	const hosts, workers, perWorker = 20, 16, 60
	const idle = 3 * time.Millisecond
	var urls []string
	for i := 0; i < hosts; i++ {
		hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
		}))
		hs.Config.ErrorLog = nilLogger()
		if h2 {
			hs.EnableHTTP2 = true
			hs.TLS = h3Cert(t).ServerConfig()
			hs.StartTLS()
		} else {
			hs.Start()
		}
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	tr := From(&http.Transport{TLSClientConfig: h3Cert(t).ClientConfig(), ForceAttemptHTTP2: h2, IdleConnTimeout: idle})
	tr.DisableHTTP3 = true
	defer tr.CloseIdleConnections()
	wantProto := "HTTP/1.1"
	if h2 {
		wantProto = "HTTP/2.0"
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < perWorker; i++ {
				u := urls[rng.IntN(hosts)]
				payload := strings.Repeat("p", 1+rng.IntN(100))
				proto, b, err := stressEchoPost(tr, u, payload)
				if err != nil || b != payload || proto != wantProto {
					t.Errorf("worker %d request %d: %s %q %v", w, i, proto, b, err)
					return
				}
				time.Sleep(time.Duration(rng.IntN(int(2 * idle))))
			}
		}(w)
	}
	wg.Wait()
	st := tr.Stats()
	t.Logf("after the run: %+v %+v", st.Conns, st.Pool)
	if st.Pool.Expirations == 0 {
		t.Errorf("no connection expired: the run did not test expiry (%+v)", st.Pool)
	}
	// Quiet now: the pool's own timer must close everything.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := tr.Stats().Conns
		if c.OpenH1 == 0 && c.IdleH1 == 0 && c.OpenH2 == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("connections left open %v after the client went quiet (IdleConnTimeout %v): %+v", 10*time.Second, idle, c)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
}
