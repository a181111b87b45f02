package server

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestShutdownClosesSilentClients checks that a client that made a
// request and then went silent without closing (its packets or segments no
// longer arrive, nothing it is sent is read) does not hold Shutdown until
// its context ends once no handler runs: over HTTP/1.1 net/http closes the
// idle connection, over HTTP/2 it sends GOAWAY and closes the connection 1s
// after its streams ended, and over HTTP/3 the connection is closed once no
// handler has run and nothing has come from the client for goAwayGrace.
// The client goes silent either after reading its answer or after
// resetting its request while the handler ran (which ends the handler's
// context; over HTTP/1.1 the client closes the connection then). quic-go's
// own Shutdown waits for such a connection until its context ends (or
// the QUIC idle timeout, 30s by default).
func TestShutdownClosesSilentClients(t *testing.T) {
	// Shutdown's context; a Shutdown held by the silent client returns
	// only at its end.
	const ctxLong = 30 * time.Second
	// goAwayGrace plus ample slack; this bound tells a held Shutdown from
	// one that closed the connection.
	const patience = 10 * time.Second
	for _, p := range allProtocols {
		for _, reset := range []bool{false, true} {
			name := string(p) + "/answered"
			if reset {
				name = string(p) + "/reset"
			}
			t.Run(name, func(t *testing.T) {
				var running atomic.Int32
				entered := make(chan struct{}, 1)
				hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					running.Add(1)
					defer running.Add(-1)
					if r.URL.Path == "/wait" { // until the client resets the request
						w.WriteHeader(http.StatusOK)
						w.(http.Flusher).Flush()
						entered <- struct{}{}
						<-r.Context().Done()
						return
					}
					io.WriteString(w, r.Proto)
				}), ErrorLog: quietLog}
				st := startTLS(t, hs, nil)
				var cut func()
				var addr string
				if p == h3 {
					r := testpeer.StartUDPRelay(t, st.srv.PacketAddr().String())
					cut, addr = r.Silence, r.Addr()
				} else {
					r := testpeer.StartRelay(t, st.srv.Addr().String())
					cut, addr = r.Silence, r.Addr()
				}
				client := newClient(t, p)
				if reset {
					resetRequest(t, client, "https://"+addr+"/wait", entered)
					waitIdle(t, &running)
				} else {
					resp, body := get(t, client, "https://"+addr+"/")
					if resp.Proto != string(p) || body != string(p) {
						t.Fatalf("request through the relay: %s %q, want %s", resp.Proto, body, p)
					}
				}
				cut()

				ctx, cancel := context.WithTimeout(context.Background(), ctxLong)
				defer cancel()
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- st.srv.Shutdown(ctx) }()
				select {
				case err := <-done:
					t.Logf("Shutdown returned %v after %v", err, time.Since(start))
					if err != nil {
						t.Errorf("Shutdown: %v, want nil", err)
					}
				case <-time.After(patience):
					t.Errorf("Shutdown still waiting %v after it began, held by a silent %s client with no handler running", patience, p)
					st.srv.Close()
					if err := <-done; err != nil && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Shutdown after Close: %v", err)
					}
				}
				if n := running.Load(); n != 0 {
					t.Errorf("%d handlers running after Shutdown", n)
				}
			})
		}
	}
}

// quietLog discards what the servers log about connections the tests cut.
var quietLog = log.New(io.Discard, "", 0)

// resetRequest sends GET url, waits until the handler has signalled
// entered and the response header has arrived, then cancels the request,
// which resets its stream (HTTP/2, HTTP/3) or closes the connection
// (HTTP/1.1).
func resetRequest(t *testing.T, c *http.Client, url string, entered <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	<-entered
	cancel()
	resp.Body.Close()
}

// waitIdle waits until no handler counted by running runs.
func waitIdle(t *testing.T, running *atomic.Int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the handler did not return after its request was reset")
		}
		time.Sleep(time.Millisecond)
	}
}
