package transport

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkRoundTripH1TLS measures one HTTP/1.1 GET over TLS on a reused
// keep-alive connection, the server (net/http's, HTTP/1.1 only) in this
// process: what a reused TLS connection's check before each request
// (fitForReuse) costs shows in ns/op and rw-syscalls/op, though the
// server's own reads and writes count in the latter too.
func BenchmarkRoundTripH1TLS(b *testing.B) {
	body := strings.Repeat("x", benchBodyLen)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(body))
	}))
	defer srv.Close()
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig
	benchServedGets(b, "ferry/h1s", func() http.RoundTripper {
		return &Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 128}
	}, srv.URL+"/bench", benchGet)
}
