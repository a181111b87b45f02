package altsvc

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestConcurrentUse runs every operation from several goroutines on one
// small cache (so evictions and sweeps happen) with a moving clock; run it
// with -race. It checks the invariants that must hold at any moment.
func TestConcurrentUse(t *testing.T) {
	c, clk := newTestCache(16)
	origins := make([]Origin, 40)
	for i := range origins {
		origins[i] = mustOrigin(t, fmt.Sprintf("https://o%d.example", i))
	}
	headers := [][]string{
		{`h3=":443"; ma=5`},
		{`h3=":443"; ma=60, h2="alt.example:8443"; persist=1`},
		{`clear`},
		{`h3=":443"`, `h3-29=":443"; ma=1`},
		{`bad`},
	}
	const workers, rounds = 6, 400
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			dst := make([]Alternative, 0, MaxAlternatives)
			for i := 0; i < rounds; i++ {
				o := origins[(i*7+w*13)%len(origins)]
				switch (i + w) % 10 {
				case 0, 1, 2:
					_ = c.UpdateFromResponse(o, headers[(i+w)%len(headers)], time.Duration(i%3)*time.Second)
				case 3:
					if a, ok := c.Usable(o, "h3"); ok {
						c.MarkBroken(o, a)
					}
				case 4:
					for _, a := range c.Lookup(o, dst[:0]) {
						c.MarkWorking(o, a)
					}
				case 5:
					if w == 0 && i%50 == 5 {
						c.NetworkChanged()
					}
					clk.Advance(100 * time.Millisecond)
				case 6:
					if n := c.Len(); n > 16 {
						errs <- fmt.Errorf("Len = %d exceeds the bound 16", n)
						return
					}
				case 7:
					if w == 1 && i%100 == 7 {
						var buf bytes.Buffer
						if err := c.Save(&buf); err != nil {
							errs <- err
							return
						}
						if _, err := c.Load(&buf); err != nil {
							errs <- err
							return
						}
					} else {
						_ = c.Snapshot()
					}
				default:
					dst = c.Lookup(o, dst[:0])
					if len(dst) > MaxAlternatives {
						errs <- fmt.Errorf("lookup returned %d alternatives", len(dst))
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if o, _ := c.resident(); o > 16 || int64(o) != c.count.Load() {
		t.Errorf("resident %d origins, count %d; bound 16", o, c.count.Load())
	}
}
