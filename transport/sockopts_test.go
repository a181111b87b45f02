package transport

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/sockopt"
)

// TestSocketOptionsSteadyState: options given per request reach the
// connection through its guard once; later requests with the same values
// make no setsockopt call, and a changed value makes exactly one.
func TestSocketOptionsSteadyState(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	for _, dialSelf := range []bool{true, false} {
		name := "ferry-dialer"
		if !dialSelf {
			name = "user-dialcontext"
		}
		t.Run(name, func(t *testing.T) {
			tr := &Transport{}
			if !dialSelf {
				tr.DialContext = (&netDialer{}).DialContext
			}
			defer tr.CloseIdleConnections()
			do := func(opts ...SocketOption) uint64 {
				ctx := WithSocketOptions(context.Background(), opts...)
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				io.ReadAll(resp.Body)
				resp.Body.Close()
				key, _ := tr.connKeyFor(req)
				pc, _, ok := tr.pool.TryGet(key)
				if !ok {
					t.Fatal("connection not pooled")
				}
				defer tr.pool.Put(key, pc)
				return pc.sock.guard.Syscalls()
			}
			base := do(TOS(0x10), TCPUserTimeout(5*time.Second))
			for i := 0; i < 20; i++ {
				if n := do(TOS(0x10), TCPUserTimeout(5*time.Second)); n != base {
					t.Fatalf("request %d: %d setsockopt calls so far, want %d (none per request)", i, n, base)
				}
			}
			if n := do(TOS(0x20), TCPUserTimeout(5*time.Second)); n != base+1 {
				t.Fatalf("changed TOS: %d calls, want %d", n, base+1)
			}
			v, err := func() (int, error) {
				key, _ := tr.connKeyFor(newReq(t, "GET", srv.URL, nil))
				pc, _, _ := tr.pool.TryGet(key)
				defer tr.pool.Put(key, pc)
				return pc.sock.guard.Read(sockopt.TOS)
			}()
			if err != nil || v != 0x20 {
				t.Fatalf("kernel TOS = %#x, %v; want 0x20", v, err)
			}
		})
	}
}
