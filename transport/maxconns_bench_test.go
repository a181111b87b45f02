package transport

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// BenchmarkMaxConnsPerHostInMemory is BenchmarkRoundTripInMemory's ferry GET
// row with and without MaxConnsPerHost: the cost of the limit on a TCP
// request that finds its connection idle (no wait, so nothing of the
// QUIC accounting runs).
func BenchmarkMaxConnsPerHostInMemory(b *testing.B) {
	const response = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n" +
		"Server: bench\r\nX-Request-Id: 1\r\n\r\nhello"
	for _, limit := range []int{0, 8} {
		name := map[int]string{0: "nolimit", 8: "limit8"}[limit]
		b.Run(name+"/GET", func(b *testing.B) {
			benchInMemory(b, func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper {
				t := New()
				t.DialContext = dial
				t.MaxConnsPerHost = limit
				return t
			}, response, "GET", false)
		})
	}
}
