package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestBaseContextCancelReachesHandlers checks that cancelling the context
// BaseContext returned cancels the contexts of running handlers on every
// protocol, as net/http does over TCP: a way to tell long-lived handlers
// (streams, long polls) that the process is stopping.
func TestBaseContextCancelReachesHandlers(t *testing.T) {
	// The handler sees its context end soon after the cancel; this bound
	// only tells "never" from "soon".
	const patience = 10 * time.Second
	for _, p := range allProtocols {
		t.Run(string(p), func(t *testing.T) {
			base, cancelBase := context.WithCancel(context.Background())
			defer cancelBase()
			entered := make(chan struct{}, 1)
			release := make(chan struct{})
			defer close(release)
			ended := make(chan struct{}, 1)
			hs := &http.Server{
				BaseContext: func(net.Listener) context.Context { return base },
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					entered <- struct{}{}
					select {
					case <-r.Context().Done():
						ended <- struct{}{}
					case <-release:
					}
				}),
			}
			st := startTLS(t, hs, nil)
			inFlight := fetch(newClient(t, p), st.url("/"))
			defer func() { st.srv.Close(); <-inFlight }()
			<-entered
			cancelBase()
			select {
			case <-ended:
			case <-time.After(patience):
				t.Fatalf("handler's request context not cancelled %v after the BaseContext was", patience)
			}
		})
	}
}

// TestBaseContextCancelKeepsConnections checks that cancelling the base
// context ends request contexts only: the connection stays open, and a
// request it carries afterwards is served with its context already done,
// as net/http does over TCP (the control rows). Over HTTP/3 this shows the
// QUIC connection's own context was not cancelled: quic-go and ConnState
// would read that as the connection closing.
func TestBaseContextCancelKeepsConnections(t *testing.T) {
	type connKey struct{}
	for _, p := range allProtocols {
		t.Run(string(p), func(t *testing.T) {
			base, cancelBase := context.WithCancel(context.Background())
			defer cancelBase()
			var conns atomic.Int64 // numbers the connections
			var closed atomic.Int64
			hs := &http.Server{
				ConnState: func(_ net.Conn, cs http.ConnState) {
					if cs == http.StateClosed {
						closed.Add(1)
					}
				},
				BaseContext: func(net.Listener) context.Context { return base },
				ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
					return context.WithValue(ctx, connKey{}, conns.Add(1))
				},
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					fmt.Fprintf(w, "conn %d done %v", r.Context().Value(connKey{}), r.Context().Err() != nil)
				}),
			}
			st := startTLS(t, hs, nil)
			client := newClient(t, p)
			if _, got := get(t, client, st.url("/")); got != "conn 1 done false" {
				t.Fatalf("first request: %q", got)
			}
			cancelBase()
			if _, got := get(t, client, st.url("/")); got != "conn 1 done true" {
				t.Fatalf("request after the base was cancelled: %q, want \"conn 1 done true\" (same connection, context done)", got)
			}
			// Over HTTP/3 a cancelled QUIC connection context would be
			// reported as the connection closing.
			if n := closed.Load(); n != 0 {
				t.Fatalf("ConnState reported %d closed connections while the connection is open", n)
			}
		})
	}
}
