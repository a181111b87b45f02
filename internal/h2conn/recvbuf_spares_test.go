package h2conn

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestSpareReceiveBuffersCoverStreamsInFlight: the small receive buffers
// of finished streams are kept for the next ones, one per stream that was
// in flight (so a busy connection's small responses allocate no buffer),
// never more than maxFreeBytes between them; large ones go to the
// process-wide pools, so an idle connection does not hold their memory.
func TestSpareReceiveBuffersCoverStreamsInFlight(t *testing.T) {
	tests := []struct {
		name    string
		streams int
		bodyLen int
		// small: each stream reads one byte of its body, and the rest
		// only once every stream of the round has done so, so that all
		// of their buffers are in use at once; every buffer is kept, and
		// the next round of as many streams uses those and no new one.
		small bool
	}{
		{name: "small-bodies", streams: 16, bodyLen: 100, small: true},
		{name: "64KiB-bodies", streams: 8, bodyLen: 64 << 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Repeat("b", tc.bodyLen)
			// The handlers answer only once every request of a round is
			// at the server, so all of a round's streams are in flight
			// together.
			var mu sync.Mutex // guards arrived and release
			arrived := 0
			release := make(chan struct{})
			s := startServer(t, false, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				arrived++
				ch := release
				if arrived == tc.streams {
					arrived = 0
					close(release)
					release = make(chan struct{})
				}
				mu.Unlock()
				<-ch
				w.Write([]byte(body))
			}))
			c := newConn(t, s, Config{})
			defer c.Close()
			round := func() {
				t.Helper()
				var wg, begun sync.WaitGroup
				allBegun := make(chan struct{})
				errs := make(chan string, tc.streams)
				begun.Add(tc.streams)
				go func() { begun.Wait(); close(allBegun) }()
				for range tc.streams {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
						if err != nil {
							begun.Done()
							errs <- err.Error()
							return
						}
						got := ""
						if tc.small {
							first := make([]byte, 1)
							if _, err := io.ReadFull(resp.Body, first); err != nil {
								errs <- err.Error()
							}
							got = string(first)
						}
						begun.Done()
						if tc.small {
							<-allBegun
						}
						if got += readAll(t, resp); got != body {
							errs <- "a body differs"
						}
					}()
				}
				wg.Wait()
				close(errs)
				for e := range errs {
					t.Fatal(e)
				}
				waitFor(t, "every stream settled", func() bool { return streamsSettled(c) })
			}

			round()
			first := spareBuffers(t, c)
			if tc.small && len(first) != tc.streams {
				t.Fatalf("%d spare buffers after %d streams in flight, want %d", len(first), tc.streams, tc.streams)
			}

			if !tc.small {
				return
			}
			round()
			second := spareBuffers(t, c)
			if len(second) != len(first) {
				t.Fatalf("%d spare buffers after the second round, want %d", len(second), len(first))
			}
			for p := range second {
				if !first[p] {
					t.Fatal("the second round allocated a receive buffer although a spare one was free for each stream")
				}
			}
		})
	}
}

// spareBuffers returns the connection's spare receive buffers by their
// first byte's address, after checking that freeBytes is their total
// capacity and within maxFreeBytes.
func spareBuffers(t *testing.T, c *Conn) map[*byte]bool {
	t.Helper()
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	set := map[*byte]bool{}
	total := 0
	for _, b := range c.o.freeBufs {
		if cap(b) >= minPooledBuf {
			t.Fatalf("the connection keeps a %d-byte buffer, which belongs in a process-wide pool", cap(b))
		}
		total += cap(b)
		set[unsafe.SliceData(b)] = true
	}
	if total != c.o.freeBytes {
		t.Fatalf("freeBytes %d, the spare buffers' capacity %d", c.o.freeBytes, total)
	}
	if total > maxFreeBytes {
		t.Fatalf("%d bytes of spare buffers, over maxFreeBytes %d", total, maxFreeBytes)
	}
	return set
}
