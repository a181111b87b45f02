package h2conn

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
)

// TestBodyCloseRacesEOF: a Read that meets EOF (and releases the slot
// there) and the caller's Close run on two goroutines, on a server that
// allows one stream at a time. Close returns nil and the slot is released
// exactly once. Run with -race. (That the connection also stays alive is
// TestBodyCloseRacesEOFKeepsConn.)
func TestBodyCloseRacesEOF(t *testing.T) {
	bodyCloseRaces(t, false)
}

// TestBodyCloseRacesEOFKeepsConn is TestBodyCloseRacesEOF that also
// wants the connection alive after every round: a Close racing Read's
// release at EOF must not make a live connection look dead.
func TestBodyCloseRacesEOFKeepsConn(t *testing.T) {
	bodyCloseRaces(t, true)
}

func bodyCloseRaces(t *testing.T, wantAlive bool) {
	s := startServer(t, true, &http.HTTP2Config{MaxConcurrentStreams: 1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	c := newConn(t, s, Config{})
	for i := 0; i < 200; i++ {
		// A Close that won the race reset the stream, which counts
		// until the server acknowledges the PING sent with the reset.
		if !c.Usable() {
			t.Fatalf("round %d: connection judged unusable", i)
		}
		waitFor(t, fmt.Sprintf("round %d: a stream", i), c.ReserveStream)
		resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		var wg sync.WaitGroup
		var closeErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			io.Copy(io.Discard, resp.Body) // EOF, or an error if Close came first
		}()
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				// Let the reader usually reach EOF first.
				for j := 0; j < 50; j++ {
					runtime.Gosched()
				}
			}
			closeErr = resp.Body.Close()
		}()
		wg.Wait()
		if closeErr != nil {
			t.Errorf("round %d: Close: %v", i, closeErr)
		}
		if _, idle := c.IdleSince(); !idle {
			t.Fatalf("round %d: slot still in use after Read and Close", i)
		}
		if !c.Usable() {
			if wantAlive {
				t.Fatalf("round %d: connection dead after Read and Close", i)
			}
			t.Logf("round %d: connection judged dead; going on with a new one", i)
			c = newConn(t, s, Config{})
		}
	}
}

// TestBodyCloseAfterEOF: after a body read to EOF (no
// request body), the caller's Close returns nil, a second Close too, the
// slot is free once, and the next request on a one-stream server goes
// through at once on the same connection.
func TestBodyCloseAfterEOF(t *testing.T) {
	s := startServer(t, true, &http.HTTP2Config{MaxConcurrentStreams: 1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	c := newConn(t, s, Config{})
	for i := 0; i < 20; i++ {
		if !c.ReserveStream() {
			t.Fatalf("round %d: no stream", i)
		}
		resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "hello" {
			t.Fatalf("round %d: read %q, %v", i, b, err)
		}
		if _, idle := c.IdleSince(); !idle {
			t.Fatalf("round %d: slot still busy after EOF", i)
		}
		for j := 0; j < 2; j++ {
			if err := resp.Body.Close(); err != nil {
				t.Fatalf("round %d: Close %d: %v", i, j, err)
			}
		}
		// A slot released twice leaves the count below zero: not idle.
		if _, idle := c.IdleSince(); !idle {
			t.Fatalf("round %d: not idle after Close (released twice?)", i)
		}
	}
}
