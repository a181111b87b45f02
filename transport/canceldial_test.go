package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestCancelWhileDialing: the deprecated CancelRequest and Request.Cancel
// end a request whose connection is still being dialled, with net/http's
// error. ferry also aborts the dial (as it does when the request's context
// ends; net/http lets it finish for its pool).
func TestCancelWhileDialing(t *testing.T) {
	for _, how := range []string{"CancelRequest", "Request.Cancel"} {
		t.Run(how, func(t *testing.T) {
			run := func(mk func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper) (error, <-chan error) {
				dialing := make(chan struct{})
				release := make(chan struct{}) // ends a dial nobody cancelled
				defer close(release)
				dialEnded := make(chan error, 1)
				rt := mk(func(ctx context.Context, _, _ string) (net.Conn, error) {
					close(dialing)
					select {
					case <-ctx.Done():
						dialEnded <- ctx.Err()
						return nil, ctx.Err()
					case <-release:
						dialEnded <- nil
						return nil, errors.New("dial released")
					case <-time.After(10 * time.Second): // a cancellation that never came
						dialEnded <- nil
						return nil, errors.New("dial never cancelled")
					}
				})
				req, err := http.NewRequest("GET", "http://dial.invalid/", nil)
				if err != nil {
					t.Fatal(err)
				}
				cancel := make(chan struct{})
				if how == "Request.Cancel" {
					req.Cancel = cancel
				}
				go func() {
					<-dialing
					if how == "CancelRequest" {
						rt.(requestCanceler).CancelRequest(req)
					} else {
						close(cancel)
					}
				}()
				_, err = rt.RoundTrip(req)
				return err, dialEnded
			}
			stdErr, stdDial := run(func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper {
				return &http.Transport{DialContext: dial}
			})
			ourErr, ourDial := run(func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper {
				return &Transport{DialContext: dial}
			})
			<-stdDial
			if stdErr == nil || ourErr == nil || stdErr.Error() != ourErr.Error() {
				t.Fatalf("RoundTrip error: net/http %v, ferry %v", stdErr, ourErr)
			}
			if err := <-ourDial; !errors.Is(err, context.Canceled) {
				t.Fatalf("ferry's dial ended with %v, want its context cancelled", err)
			}
		})
	}
}
