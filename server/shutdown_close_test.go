package server

import (
	"context"
	"testing"
	"time"
)

// TestShutdownReturnsAfterClose checks that Close, called while Shutdown
// waits for a handler that ignores its context or before Shutdown is
// called, makes Shutdown return nil without waiting for that handler or
// for its context: net/http's Shutdown returns once Close has dropped the
// connections (the HTTP/1.1 and HTTP/2 rows). Shutdown's context is long;
// a Shutdown that waited for it would return its error instead of nil.
func TestShutdownReturnsAfterClose(t *testing.T) {
	const ctxLong = 5 * time.Second
	for _, p := range []protocol{h1, h2, h3} {
		for _, closeFirst := range []bool{false, true} {
			name := string(p) + "/Close during Shutdown"
			if closeFirst {
				name = string(p) + "/Close before Shutdown"
			}
			t.Run(name, func(t *testing.T) {
				st, _ := startDeafRequest(t, p)

				ctx, cancel := context.WithTimeout(context.Background(), ctxLong)
				defer cancel()
				done := make(chan error, 1)
				if closeFirst {
					st.srv.Close()
					go func() { done <- st.srv.Shutdown(ctx) }()
				} else {
					go func() { done <- st.srv.Shutdown(ctx) }()
					st.waitServe() // Shutdown has closed the listeners
					st.srv.Close()
				}
				if err := <-done; err != nil {
					t.Fatalf("Shutdown: %v, want nil once Close dropped the connections", err)
				}
			})
		}
	}
}
