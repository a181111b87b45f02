package h2conn

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestBodiesIntactThroughGrowingBuffers: the server interleaves the DATA
// of many streams in frames of random sizes while each caller reads its
// body in chunks of random sizes, so stream buffers grow, move to larger
// ones, drop what was read and go back to the pools for the next round,
// on several rounds: every caller must read exactly its own body. Half of
// the responses declare their length (their buffer is sized for the rest
// of the body at once), half do not.
func TestBodiesIntactThroughGrowingBuffers(t *testing.T) {
	const streams, rounds = 8, 4
	bodyLen := func(i int) int { return 1 + (i*37_411)%(300<<10) } // 1 B to 300 KiB
	body := func(i int) []byte {
		b := make([]byte, bodyLen(i))
		for j := range b {
			b[j] = byte(i*131 + j*7 + j>>9)
		}
		return b
	}
	var mu sync.Mutex // guards pending
	var pending []uint32
	srv := testpeer.StartH2(t, testpeer.H2Script{
		OnHeaders: func(_, k int, fr *http2.Framer, id uint32) error {
			mu.Lock()
			pending = append(pending, id)
			ids := pending
			if len(ids) < streams {
				mu.Unlock()
				return nil
			}
			pending = nil
			mu.Unlock()
			return writeInterleaved(fr, ids, k, body)
		},
	})
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, streams)
		for g := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/", nil))
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				i, err := strconv.Atoi(resp.Header.Get("X-Body"))
				if err != nil {
					errs <- err
					return
				}
				var got bytes.Buffer
				chunk := make([]byte, 64<<10)
				for {
					n, err := resp.Body.Read(chunk[:1+rng.IntN(len(chunk))])
					got.Write(chunk[:n])
					if err == io.EOF {
						break
					}
					if err != nil {
						errs <- err
						return
					}
				}
				if want := body(i); !bytes.Equal(got.Bytes(), want) {
					errs <- fmt.Errorf("round %d: body %d: read %d bytes, want %d, or other bytes", round, i, got.Len(), len(want))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// writeInterleaved answers streams ids (the k-th request is the last of
// them) with body(n) each, n numbering the responses of the connection,
// their DATA frames of random sizes taking turns.
func writeInterleaved(fr *http2.Framer, ids []uint32, k int, body func(int) []byte) error {
	rng := rand.New(rand.NewPCG(uint64(k), 1))
	bodies := make([][]byte, len(ids))
	for s, id := range ids {
		n := k + 1 - len(ids) + s
		bodies[s] = body(n)
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		enc.WriteField(hpack.HeaderField{Name: "x-body", Value: strconv.Itoa(n)})
		if n%2 == 0 {
			enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(bodies[s]))})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
	}
	for left := len(ids); left > 0; {
		for s, id := range ids {
			if bodies[s] == nil {
				continue
			}
			n := min(len(bodies[s]), 1+rng.IntN(16<<10))
			end := n == len(bodies[s])
			if err := fr.WriteData(id, end, bodies[s][:n]); err != nil {
				return err
			}
			bodies[s] = bodies[s][n:]
			if end {
				bodies[s] = nil
				left--
			}
		}
	}
	return nil
}
