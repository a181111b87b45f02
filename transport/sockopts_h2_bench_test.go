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

// BenchmarkSocketOptionsH2 sends serial GETs over one shared HTTP/2
// connection (TLS, loopback) and reports the setsockopt calls each request
// made, counted by the connection's guard.
//
//	none:      requests without socket options, the baseline in the same run.
//	guarded:   every request carries a TOS mark and a TCP user timeout, the
//	           values already in effect: the guard makes no syscall.
//	unguarded: the same requests with the guard's record wiped before each
//	           one, which is what applying them without a guard costs.
func BenchmarkSocketOptionsH2(b *testing.B) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.EnableHTTP2 = true
	srv.TLS = h3Cert(b).ServerConfig()
	srv.Config.ErrorLog = nilLogger()
	srv.StartTLS()
	defer srv.Close()
	opts := []SocketOption{TOS(0x10), TCPUserTimeout(5 * time.Second)}
	for _, row := range []string{"none", "guarded", "unguarded"} {
		b.Run(row, func(b *testing.B) {
			tr := &Transport{TLSClientConfig: h3Cert(b).ClientConfig(), ForceAttemptHTTP2: true}
			defer tr.CloseIdleConnections()
			ctx := WithSocketOptions(context.Background(), opts...)
			req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			plain, err := http.NewRequest("GET", srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			do := func(req *http.Request) {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != 2 || resp.StatusCode != 200 || resp.ProtoMajor != 2 {
					b.Fatalf("bad response: %s %d, %d bytes, %v", resp.Proto, resp.StatusCode, n, err)
				}
			}
			do(req) // dial, and apply the options once
			key, err := tr.connKeyFor(req)
			if err != nil {
				b.Fatal(err)
			}
			guard := func() *sockopt.Guard {
				s, ok := tr.pool.GetShared(key)
				if !ok {
					b.Fatal("no shared connection pooled")
				}
				s.(sharedConn).ReleaseStream()
				g, err := s.(socketCarrier).socket().guardNow()
				if err != nil {
					b.Fatal(err)
				}
				return g
			}
			g := guard()
			before := g.Syscalls()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				switch row {
				case "none":
					do(plain)
				case "unguarded":
					g.Forget(sockopt.TOS)
					g.Forget(sockopt.UserTimeout)
					fallthrough
				default:
					do(req)
				}
			}
			b.StopTimer()
			if guard() != g {
				b.Fatal("requests moved to another connection; the count would be wrong")
			}
			b.ReportMetric(float64(g.Syscalls()-before)/float64(b.N), "setsockopt/op")
		})
	}
}
