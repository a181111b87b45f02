package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// contextDeafHandler ignores its request context: it answers only when
// release is closed, like a handler blocked in work that takes no context
// (a syscall, a lock, a CPU-bound loop).
type contextDeafHandler struct {
	entered chan struct{}
	release chan struct{}
}

func (h *contextDeafHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.entered <- struct{}{}
	<-h.release
	w.Write([]byte("late"))
}

// TestShutdownContextEndsWhileHandlerIgnoresIt checks that Shutdown returns
// the context's error once its context ends, even though a handler that
// ignores its context is still running, on HTTP/3 as net/http does on
// HTTP/2 (the control row). The HTTP/3 handler finishes in the background;
// TestMain's leak check sees that nothing is left once it has returned.
func TestShutdownContextEndsWhileHandlerIgnoresIt(t *testing.T) {
	// Shutdown has to return soon after its 100ms context; this bound only
	// tells a hang from a pass.
	const hangBound = 10 * time.Second
	for _, p := range []protocol{h2, h3} {
		t.Run(string(p), func(t *testing.T) {
			h := &contextDeafHandler{entered: make(chan struct{}, 1), release: make(chan struct{})}
			st := startTLS(t, &http.Server{Handler: h}, nil)
			inFlight := fetch(newClient(t, p), st.url("/"))
			<-h.entered
			var once sync.Once
			release := func() { once.Do(func() { close(h.release) }) }
			defer func() { <-inFlight }()
			defer release()

			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- st.srv.Shutdown(ctx) }()
			select {
			case err := <-done:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Shutdown: %v, want context.DeadlineExceeded", err)
				}
			case <-time.After(hangBound):
				t.Errorf("Shutdown still blocked %v after its context ended, with the handler running", hangBound)
				release()
				<-done
			}
		})
	}
}
