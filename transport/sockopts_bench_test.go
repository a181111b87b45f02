package transport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/sockopt"
)

// BenchmarkSocketOptions sends requests carrying per-request socket options
// (a TOS mark and a TCP user timeout) over one reused connection and reports
// the setsockopt calls each request made, counted by the connection's guard.
//
//	guarded:   ferry as it is: the guard skips values already in effect.
//	unguarded: the same requests with the guard's record wiped before each
//	           one, which is what applying the options per request without
//	           a guard costs: the baseline, in the same run.
func BenchmarkSocketOptions(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	opts := []SocketOption{TOS(0x10), TCPUserTimeout(5 * time.Second)}
	for _, guarded := range []bool{true, false} {
		name := "guarded"
		if !guarded {
			name = "unguarded"
		}
		b.Run(name, func(b *testing.B) {
			tr := &Transport{}
			defer tr.CloseIdleConnections()
			ctx := WithSocketOptions(context.Background(), opts...)
			req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			key, err := tr.connKeyFor(req)
			if err != nil {
				b.Fatal(err)
			}
			guard := func() *sockopt.Guard {
				pc, _, ok := tr.pool.TryGet(key)
				if !ok {
					b.Fatal("connection not pooled after a request")
				}
				defer tr.pool.Put(key, pc)
				return pc.sock.guard
			}
			do := func() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != 2 || resp.StatusCode != 200 {
					b.Fatalf("bad response: status %d, %d bytes, %v", resp.StatusCode, n, err)
				}
			}
			do() // dial, and apply the options once
			g := guard()
			before := g.Syscalls()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !guarded {
					g.Forget(sockopt.TOS)
					g.Forget(sockopt.UserTimeout)
				}
				do()
			}
			b.StopTimer()
			if guard() != g {
				b.Fatal("requests moved to another connection; the count would be wrong")
			}
			b.ReportMetric(float64(g.Syscalls()-before)/float64(b.N), "setsockopt/op")
		})
	}
}
