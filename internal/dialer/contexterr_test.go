//go:build linux

package dialer

import (
	"context"
	"errors"
	"net"
	"net/http/httptrace"
	"net/netip"
	"testing"
	"time"
)

// TestContextEndReportedAsNetDialer: when the Dialer's Timeout, the
// context's deadline or a cancel ends a connect that hangs, the error has
// net.Dialer's text, Timeout() and errors.Is identity, with one address
// (the attempt on the caller's goroutine) and with several (the race).
func TestContextEndReportedAsNetDialer(t *testing.T) {
	port := hangingV4(t)
	addr := netip.AddrPortFrom(v4, port).String()
	const short = 20 * time.Millisecond
	cases := []struct {
		name    string
		timeout time.Duration // Dialer.Timeout for both
		ctx     func() (context.Context, context.CancelFunc)
		is      error
	}{
		{"dialer timeout", short, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 10*time.Second) // hang guard
		}, context.DeadlineExceeded},
		{"context deadline", 0, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), short)
		}, context.DeadlineExceeded},
		{"cancel at connect start", 0, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{ConnectStart: func(string, string) { cancel() }}), cancel
		}, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			_, want := (&net.Dialer{Timeout: tc.timeout}).DialContext(ctx, "tcp", addr)
			cancel()
			for _, addrs := range [][]netip.Addr{{v4}, {v4, v4}} {
				ctx, cancel := tc.ctx()
				_, got := (&Dialer{Timeout: tc.timeout}).DialAddrs(ctx, addrs, port)
				cancel()
				if got == nil || got.Error() != want.Error() {
					t.Fatalf("%d address(es): ferry %v, net %v", len(addrs), got, want)
				}
				var gne, wne net.Error
				if !errors.As(got, &gne) || !errors.As(want, &wne) || gne.Timeout() != wne.Timeout() {
					t.Fatalf("%d address(es): Timeout() differs: ferry %v, net %v", len(addrs), got, want)
				}
				// net's own deadline error is errors.Is DeadlineExceeded only
				// when its context, not the socket deadline, wins the race;
				// ferry's always is (the package contract).
				if !errors.Is(got, tc.is) {
					t.Fatalf("%d address(es): %v is not %v", len(addrs), got, tc.is)
				}
			}
		})
	}
}
