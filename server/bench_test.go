package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// benchBody is the fixed response every benchmark request must receive.
const benchBody = "hello, ferry"

var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", strconv.Itoa(len(benchBody)))
	io.WriteString(w, benchBody)
})

// startBare serves hs with the plain net/http ServeTLS on a loopback port:
// the baseline the wrapper is compared with.
func startBare(b *testing.B, hs *http.Server) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs.TLSConfig = testCert.ServerConfig()
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.ServeTLS(ln, "", "")
	}()
	b.Cleanup(func() {
		hs.Close()
		<-done
	})
	return "https://" + ln.Addr().String() + "/"
}

// startWrapped serves hs through Wrap with HTTP/3 on, so TCP responses
// carry Alt-Svc as in production.
func startWrapped(b *testing.B, hs *http.Server) string {
	b.Helper()
	hs.Addr = "127.0.0.1:0"
	hs.TLSConfig = testCert.ServerConfig()
	srv := Wrap(hs)
	if err := srv.ListenTLS("", ""); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve()
	}()
	b.Cleanup(func() {
		srv.Close()
		<-done
	})
	return "https://" + srv.Addr().String() + "/"
}

// benchTransport speaks exactly p (h1 or h2) and trusts the test certificate.
func benchTransport(p protocol, maxConns int) *http.Transport {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: testCert.Pool},
		Protocols:           new(http.Protocols),
		MaxIdleConnsPerHost: 64,
		MaxConnsPerHost:     maxConns,
	}
	if p == h1 {
		tr.Protocols.SetHTTP1(true)
	} else {
		tr.Protocols.SetHTTP2(true)
	}
	return tr
}

// doRequest performs one GET and fails the benchmark unless it returned
// 200 with the expected body.
func doRequest(tr http.RoundTripper, req *http.Request, buf []byte) error {
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	n, err := io.ReadFull(resp.Body, buf[:len(benchBody)])
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || string(buf[:n]) != benchBody {
		return fmt.Errorf("status %d body %q", resp.StatusCode, buf[:n])
	}
	return nil
}

// BenchmarkServe compares request throughput through the wrapper with the
// bare http.Server it wraps, over HTTP/1.1 and HTTP/2 with TLS, clients in
// parallel (GOMAXPROCS goroutines). Budget: wrapped >= 0.97 x bare.
func BenchmarkServe(b *testing.B) {
	for _, mode := range []string{"wrapped", "bare"} {
		for _, p := range []protocol{h1, h2} {
			name := map[protocol]string{h1: "h1", h2: "h2"}[p]
			b.Run(mode+"/"+name, func(b *testing.B) {
				hs := &http.Server{Handler: benchHandler}
				var url string
				if mode == "wrapped" {
					url = startWrapped(b, hs)
				} else {
					url = startBare(b, hs)
				}
				tr := benchTransport(p, 0)
				defer tr.CloseIdleConnections()
				req, _ := http.NewRequest("GET", url, nil)
				if err := doRequest(tr, req, make([]byte, 64)); err != nil { // warm the connection
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					buf := make([]byte, 64)
					for pb.Next() {
						if err := doRequest(tr, req, buf); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkH2Streams measures the per-request cost on ONE HTTP/2
// connection with 1, 10, 100 and 1000 requests in flight at once. The cost
// per request should stay flat as concurrency grows.
func BenchmarkH2Streams(b *testing.B) {
	for _, streams := range []int{1, 10, 100, 1000} {
		b.Run(strconv.Itoa(streams), func(b *testing.B) {
			var conns atomic.Int64
			hs := &http.Server{
				Handler: benchHandler,
				HTTP2:   &http.HTTP2Config{MaxConcurrentStreams: 1000},
				ConnState: func(_ net.Conn, s http.ConnState) {
					if s == http.StateNew {
						conns.Add(1)
					}
				},
			}
			url := startWrapped(b, hs)
			tr := benchTransport(h2, 1)
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest("GET", url, nil)
			if err := doRequest(tr, req, make([]byte, 64)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range streams {
				wg.Go(func() {
					buf := make([]byte, 64)
					for next.Add(1) <= int64(b.N) {
						if err := doRequest(tr, req, buf); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if n := conns.Load(); n != 1 {
				b.Fatalf("%d connections, want all streams on one", n)
			}
		})
	}
}

// BenchmarkH3Handler measures what the wrapper adds to each HTTP/3 request
// (counting it on its connection, the panic guard): the handler called
// through h3Handler against the same handler called directly, with a
// request context shaped like quic-go's (connection values, then a cancel).
func BenchmarkH3Handler(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	ctx := context.WithValue(context.Background(), activityKey{}, &connActivity{})
	ctx = context.WithValue(ctx, http.ServerContextKey, &http.Server{})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := httptest.NewRequest("GET", "https://example.test/", nil).WithContext(ctx)
	for _, row := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", ok},
		{"wrapped", &h3Handler{next: ok}},
	} {
		b.Run(row.name, func(b *testing.B) {
			w := &statusRecorder{}
			b.ReportAllocs()
			for b.Loop() {
				w.code = 0
				row.h.ServeHTTP(w, req)
				if w.code != http.StatusNoContent {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}

// statusRecorder is a ResponseWriter that keeps only the status.
type statusRecorder struct{ code int }

func (w *statusRecorder) Header() http.Header         { return nil }
func (w *statusRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (w *statusRecorder) WriteHeader(code int)        { w.code = code }
