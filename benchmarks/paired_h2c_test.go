package benchmarks

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"

	"github.com/ferryhttp/ferry/internal/benchchild"
	"github.com/ferryhttp/ferry/transport"
	"golang.org/x/net/http2"
)

// BenchmarkPairedH2C/{g1,g64} is BenchmarkPairedH2's small GET over
// cleartext HTTP/2 with prior knowledge (h2c): ferry and net/http with
// Protocols set to unencrypted HTTP/2 alone, and x/net's http2.Transport
// with AllowHTTP, take turns against a net/http h2c server in a child
// process. The metrics are BenchmarkPairedH2's.

// h2cServerEnv makes the test binary a child serving h2c.
const h2cServerEnv = "FERRY_BENCHMARKS_H2C_SERVER"

func runH2CServer() { benchchild.ServeH2C(http.HandlerFunc(serveSmall)) }

var h2cChild = &childServer{env: h2cServerEnv, serve: runH2CServer}

func startH2CServer(b *testing.B) string { return h2cChild.start(b) }

// h2cClients speak HTTP/2 in cleartext with prior knowledge.
func h2cClients() (*transport.Transport, *http.Transport, *http2.Transport) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	plain := func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return &transport.Transport{Protocols: &p},
		&http.Transport{Protocols: &p},
		&http2.Transport{AllowHTTP: true, DialTLSContext: plain}
}

func BenchmarkPairedH2C(b *testing.B) {
	url := "http://" + startH2CServer(b) + "/bench"
	get := func(rt http.RoundTripper) func() { return h2Get(b, rt, url, h2BodyLen) }
	runPairedH2(b, "", h2cClients, get)
}
