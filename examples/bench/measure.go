package main

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/ferryhttp/ferry/internal/proccost"
)

// sample is one measured round of one client on one case, per request.
type sample struct {
	ns, cpuNs, allocs, rwSyscalls float64
}

// procCost is what the process has spent so far.
type procCost struct {
	wall    time.Time
	mallocs uint64
	proc    proccost.Cost // CPU time and read/write syscalls
}

// readCost reads the wall clock, allocations (runtime.MemStats) and the
// process's CPU time and read/write syscalls (internal/proccost).
func readCost() procCost {
	c := procCost{wall: time.Now()}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c.mallocs = ms.Mallocs
	c.proc = proccost.Read()
	return c
}

// perRequest turns the difference of two costs into per-request figures.
func perRequest(before, after procCost, n int) sample {
	f := float64(n)
	return sample{
		ns:         float64(after.wall.Sub(before.wall).Nanoseconds()) / f,
		cpuNs:      float64((after.proc.CPU - before.proc.CPU).Nanoseconds()) / f,
		allocs:     float64(after.mallocs-before.mallocs) / f,
		rwSyscalls: float64(after.proc.RW-before.proc.RW) / f,
	}
}

// get sends one GET and checks the status and the body length.
func get(rt http.RoundTripper, req *http.Request, buf []byte, wantProto int) error {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	n, err := io.ReadFull(resp.Body, buf[:bodyLen])
	if err == nil {
		var extra int
		extra, err = resp.Body.Read(buf)
		if extra != 0 || err != io.EOF {
			err = fmt.Errorf("body longer than %d bytes", bodyLen)
		} else {
			err = nil
		}
	}
	resp.Body.Close()
	switch {
	case err != nil:
		return fmt.Errorf("body after %d bytes: %w", n, err)
	case resp.StatusCode != 200:
		return fmt.Errorf("status %d", resp.StatusCode)
	case resp.ProtoMajor != wantProto:
		return fmt.Errorf("protocol %s, want HTTP/%d", resp.Proto, wantProto)
	}
	return nil
}

// measure sends n requests to url over rt from goroutines goroutines and
// returns the per-request cost. The first error stops it.
func measure(rt http.RoundTripper, url string, n, goroutines, wantProto int) (sample, error) {
	per := n / goroutines
	n = per * goroutines
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	start := make(chan struct{})
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest("GET", url, nil)
			if err != nil {
				errs <- err
				return
			}
			buf := make([]byte, bodyLen+1)
			<-start
			for i := 0; i < per; i++ {
				if err := get(rt, req, buf, wantProto); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	before := readCost()
	close(start)
	wg.Wait()
	after := readCost()
	close(errs)
	if err := <-errs; err != nil {
		return sample{}, err
	}
	return perRequest(before, after, n), nil
}
