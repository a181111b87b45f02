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

// TestLookupSeesWholeHeaders checks that a lookup concurrent with updates,
// broken marks and clears of the same origin sees one whole state: all the
// alternatives of one header (the first possibly marked broken) or none,
// never a mix of two.
func TestLookupSeesWholeHeaders(t *testing.T) {
	c, _ := newTestCache(0)
	o := mustOrigin(t, "https://whole.example")
	headers := []Header{
		{Services: portServices(1000, MaxAlternatives)},
		{Services: portServices(2000, 3)},
		{Clear: true},
	}
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.Update(o, headers[i%len(headers)], 0); err != nil {
				t.Error(err)
				return
			}
			if a, ok := c.Usable(o, "h3"); ok {
				c.MarkBroken(o, a)
			}
		}
	}()
	var readers sync.WaitGroup
	errs := make(chan error, 2)
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			dst := make([]Alternative, 0, MaxAlternatives)
			for i := 0; i < 20000; i++ {
				dst = c.Lookup(o, dst[:0])
				if err := wholeHeader(dst); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	writer.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// portServices returns n h3 services on ports base, base+1, ...
func portServices(base, n int) []Service {
	svcs := make([]Service, n)
	for i := range svcs {
		svcs[i] = Service{Protocol: "h3", Port: uint16(base + i), MaxAge: DefaultMaxAge}
	}
	return svcs
}

// wholeHeader reports an error unless alts is empty or exactly one of the
// headers of TestLookupSeesWholeHeaders, in order, with at most the first
// alternative marked broken.
func wholeHeader(alts []Alternative) error {
	if len(alts) == 0 {
		return nil
	}
	base, n := 1000, MaxAlternatives
	if alts[0].Port == 2000 {
		base, n = 2000, 3
	}
	if len(alts) != n {
		return fmt.Errorf("lookup saw %d alternatives starting at port %d, want %d", len(alts), alts[0].Port, n)
	}
	for i, a := range alts {
		if int(a.Port) != base+i {
			return fmt.Errorf("alternative %d has port %d, want %d (mixed states)", i, a.Port, base+i)
		}
		if i > 0 && a.Failures() != 0 {
			return fmt.Errorf("alternative %d is marked broken; only the first ever is", i)
		}
	}
	return nil
}
