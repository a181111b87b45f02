package h2conn

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
)

// TestUnreservedRoundTripsEachTakeOneSlot: RoundTrips called without
// ReserveStream, many at once, each take a slot of their own and give it
// back once: afterwards nothing is counted reserved or in use and the
// connection reports itself idle. A RoundTrip that took its slot in one
// critical section and used it in another let a concurrent one use it
// first, which left the counts negative (a connection never idle, a
// stream never settled).
func TestUnreservedRoundTripsEachTakeOneSlot(t *testing.T) {
	s := startServer(t, false, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	c := newConn(t, s, Config{})
	defer c.Close()
	const goroutines, each = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "ok" {
					errs <- fmt.Errorf("body %q, %v", b, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a request failed: %v", err)
	}
	waitFor(t, "no stream open", func() bool {
		c.o.mu.Lock()
		defer c.o.mu.Unlock()
		return len(c.o.streams) == 0
	})
	c.o.mu.Lock()
	reserved, busy := c.o.reserved, c.o.busy
	c.o.mu.Unlock()
	if reserved != 0 || busy != 0 {
		t.Fatalf("after %d requests: %d slots counted reserved and %d in use, want 0 and 0", goroutines*each, reserved, busy)
	}
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("the connection does not report itself idle")
	}
}
