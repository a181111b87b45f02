package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// h2FuzzBound bounds one input's request and body read: a hang, not a
// slow machine, reaches it.
const h2FuzzBound = 5 * time.Second

// FuzzH2ServerFrames: the fuzzer's bytes are what a cleartext HTTP/2
// server writes after the preface and SETTINGS exchange, once the
// client's first request (stream 1) has arrived; the server then closes
// its sending side (a request retried on a new connection is answered
// plainly there). The request through ferry's Transport must end with
// a response or an error (the body read included) within a bound, with no
// panic, the process must not allocate more than a generous bound for an
// input of a few KiB, and once the client's idle connections are closed
// and the server's side of them has ended the goroutines must return to
// their number before the input. The seed corpus
// (testdata/fuzz/FuzzH2ServerFrames) holds well-formed answers, each frame
// type, and hostile sequences (protocol and flow-control violations,
// floods of empty frames, a header block that never ends, a frame cut
// short).
//
// One server serves every input of a fuzzing process: a listener per
// input ran out of loopback ports within a minute of fuzzing (each closed
// connection keeps its server port in TIME_WAIT, since the server closes
// first).
func FuzzH2ServerFrames(f *testing.F) {
	var mu sync.Mutex // guards input and conns
	var input []byte  // the server bytes of the input being run
	conns := 0        // the connections the input being run has made
	s := testpeer.StartH2Hostile(f, testpeer.H2HostileScript{
		Serve: func(p *testpeer.H2Peer) {
			id, ok := p.NextStream(h2FuzzBound)
			if !ok {
				return
			}
			mu.Lock()
			data, first := input, conns == 0
			conns++
			mu.Unlock()
			if !first {
				// A request retried on a new connection (after a
				// GOAWAY, a REFUSED_STREAM or a lost connection) is
				// answered plainly, so retries end.
				p.OK(id, "retried")
				<-p.Closed()
				return
			}
			if p.WriteRaw(data) != nil {
				return
			}
			p.Conn.(*net.TCPConn).CloseWrite()
			<-p.Closed()
		},
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return // the frames of interest fit; larger inputs only slow the fuzzer
		}
		goroutines := runtime.NumGoroutine()
		mu.Lock()
		input, conns = data, 0
		mu.Unlock()
		allocated := totalAllocSince()
		tr := From(&http.Transport{Protocols: protocolsOf("h2c"), MaxResponseHeaderBytes: 64 << 10})
		tr.h2.backoffUnit = time.Microsecond // retries without the second-long waits
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), h2FuzzBound)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+s.Addr()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if errors.Is(err, context.DeadlineExceeded) || time.Since(start) >= h2FuzzBound {
			t.Fatalf("no answer and no error after %v: %v", time.Since(start), err)
		}
		tr.CloseIdleConnections()
		if a := allocated(); a > 64<<20 {
			t.Fatalf("%d MiB allocated for a %d-byte server stream", a>>20, len(data))
		}
		h2FuzzGoroutinesBack(t, goroutines)
	})
}

// h2FuzzGoroutinesBack waits, up to h2FuzzBound, until the process has no
// more goroutines than before the input, and fails with their stacks if
// that never happens (a connection's reader or a request's goroutine left
// behind).
func h2FuzzGoroutinesBack(t *testing.T, before int) {
	deadline := time.Now().Add(h2FuzzBound)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines %v after the input, %d before:\n%s", runtime.NumGoroutine(), h2FuzzBound, before, buf)
		}
		time.Sleep(time.Millisecond)
	}
}
