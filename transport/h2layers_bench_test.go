package transport

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/ferryhttp/ferry/internal/h2conn"
	"golang.org/x/net/http2"
)

// BenchmarkH2Layers splits the HTTP/2 rows of BenchmarkRoundTrip by layer:
// the same GETs to the same child server, each on one connection dialled
// by the benchmark, sent
//   - xnetconn: straight to an x/net http2.ClientConn (no Transport, no
//     pool);
//   - h2conn: through ferry's internal/h2conn boundary (stream
//     reservation, body wrapper, idle tracking), without ferry's
//     Transport.
//
// With BenchmarkRoundTrip's xnet, ferry and nethttp rows this shows what
// each layer adds. Serial rows are ping-pongs: the client's CPU per request
// there depends on whether the response's HEADERS and DATA records, which
// the server writes with two write calls, reach the client in one read or
// in two (see rw-syscalls/op), and that depends on timing as much as on
// the client's work.
func BenchmarkH2Layers(b *testing.B) {
	url := startBenchH2Server(b)
	benchServedGets(b, "xnetconn/h2", func() http.RoundTripper {
		cc, err := (&http2.Transport{}).NewClientConn(dialBenchH2(b, url))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cc.Close() })
		return roundTripFunc(cc.RoundTrip)
	}, url, benchH2Get)
	benchServedGets(b, "h2conn/h2", func() http.RoundTripper {
		c, err := h2conn.NewClientConn(dialBenchH2(b, url), h2conn.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !c.ReserveStream() {
				b.Error("h2conn: no stream free on an unshared connection")
			}
			return c.RoundTrip(r)
		})
	}, url, benchH2Get)
}

// dialBenchH2 dials the HTTP/2 bench server and completes a TLS handshake
// that negotiates h2.
func dialBenchH2(b *testing.B, url string) *tls.Conn {
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/bench")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) // loopback child, throwaway cert
	if err := tc.Handshake(); err != nil {
		nc.Close()
		b.Fatal(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		tc.Close()
		b.Fatalf("negotiated %q, want h2", p)
	}
	return tc
}
