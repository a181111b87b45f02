package dnscache

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// TestContextEndReportedAsNetResolver: a caller whose context ends while
// the lookup waits gets the error net.Resolver gives in that case (same
// text, IsTimeout, errors.Is the context's error).
func TestContextEndReportedAsNetResolver(t *testing.T) {
	srv := dnstest.Start(t)
	srv.CloseGate()
	cases := []struct {
		name string
		// ctx returns the lookup's context; the lookup of name must end
		// by it while the server holds its answers.
		ctx func(name string) (context.Context, context.CancelFunc)
		is  error
	}{
		{"deadline", func(string) (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 10*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func(name string) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				srv.AwaitQueries(t, name, "A", 1)
				cancel()
			}()
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			netName, ferryName := "net-"+tc.name+".ferry.test", "ferry-"+tc.name+".ferry.test"
			srv.Set(netName, "127.0.0.1")
			srv.Set(ferryName, "127.0.0.1")
			ctx, cancel := tc.ctx(netName)
			_, want := srv.Resolver().LookupNetIP(ctx, "ip", netName)
			cancel()
			c := newTestCache(t, srv, newFakeClock(), nil)
			ctx, cancel = tc.ctx(ferryName)
			_, got := c.LookupNetIP(ctx, ferryName)
			cancel()
			var wde, gde *net.DNSError
			if !errors.As(want, &wde) || !errors.As(got, &gde) {
				t.Fatalf("errors %v (%T), %v (%T): want *net.DNSError from both", want, want, got, got)
			}
			wantText := "lookup " + netName + ": "
			gotText := "lookup " + ferryName + ": "
			if got.Error()[len(gotText):] != want.Error()[len(wantText):] || gde.IsTimeout != wde.IsTimeout || gde.IsNotFound != wde.IsNotFound {
				t.Fatalf("ferry %q (timeout %v), net %q (timeout %v)", got, gde.IsTimeout, want, wde.IsTimeout)
			}
			if !errors.Is(got, tc.is) || !errors.Is(want, tc.is) {
				t.Fatalf("errors.Is(%v): ferry %v, net %v", tc.is, errors.Is(got, tc.is), errors.Is(want, tc.is))
			}
			// Let every query in flight be answered before the server closes.
			for _, n := range []string{netName, ferryName} {
				srv.AwaitQueries(t, n, "A", 1)
				srv.AwaitQueries(t, n, "AAAA", 1)
			}
			srv.AnsweredAll(t)
			srv.CloseGate()
		})
	}
	srv.OpenGate()
}
