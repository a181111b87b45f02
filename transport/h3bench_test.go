package transport

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/altsvc"
)

// BenchmarkH3Fallback measures what a network that drops UDP costs. Every
// iteration is a fresh Transport making a fresh TLS connection, so the rows
// compare like with like:
//
//   - tcp_only: DisableHTTP3, the baseline (tcp_only_second: its second
//     request, on the pooled connection);
//   - blackhole_first: the alternative is known, nothing is pooled, UDP is
//     swallowed: the request waits for the head start, then uses TCP;
//   - blackhole_second: the request after that one (timed alone), while the
//     QUIC dial is still hanging: it takes the pooled TCP connection and
//     must not wait again (compare tcp_only_second);
//   - blackhole_marked: the alternative is already marked broken: it must
//     cost what tcp_only costs.
func BenchmarkH3Fallback(b *testing.B) {
	port := blackholeUDP(b)
	u := startTLS(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	origin := originOf(b, u)
	get := func(b *testing.B, tr *Transport) {
		req, _ := http.NewRequest("GET", u, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != "ok" || resp.ProtoMajor != 1 {
			b.Fatalf("%s %d %q %v", resp.Proto, resp.StatusCode, body, err)
		}
	}
	fresh := func(b *testing.B, mark, disable bool) *Transport {
		c := altsvc.New(altsvc.Options{})
		advertise(b, c, u, altValue("", port))
		if mark {
			alt, _ := c.Usable(origin, "h3")
			c.MarkBroken(origin, alt)
		}
		return &Transport{TLSClientConfig: h3Cert(b).ClientConfig(), AltSvc: c, DisableHTTP3: disable}
	}
	for _, bc := range []struct {
		name          string
		mark, disable bool
		second        bool
	}{
		{"tcp_only", false, true, false},
		{"tcp_only_second", false, true, true},
		{"blackhole_first", false, false, false},
		{"blackhole_second", false, false, true},
		{"blackhole_marked", true, false, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				tr := fresh(b, bc.mark, bc.disable)
				if bc.second {
					get(b, tr)
				}
				start := time.Now()
				b.StartTimer()
				get(b, tr)
				b.StopTimer()
				total += time.Since(start)
				tr.CloseIdleConnections()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/req")
		})
	}
}

// BenchmarkH3RoundTrip compares a GET on a pooled HTTP/3 connection with
// the same GET on a pooled HTTP/2 connection to the same server (ferry's
// wrapper), both through ferry's Transport; net_http_h2 is net/http's
// Transport on HTTP/2 as the baseline.
func BenchmarkH3RoundTrip(b *testing.B) {
	u := startWrapped(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	cfg := h3Cert(b).ClientConfig()
	h3 := &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	h2 := &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, DisableHTTP3: true}
	std := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	defer h3.CloseIdleConnections()
	defer h2.CloseIdleConnections()
	defer std.CloseIdleConnections()
	advertise(b, h3.altSvcCache(), u, altValue("", originOf(b, u).Port()))
	for _, bc := range []struct {
		name  string
		rt    http.RoundTripper
		proto string
	}{
		{"ferry_h3", h3, "HTTP/3.0"},
		{"ferry_h2", h2, "HTTP/2.0"},
		{"net_http_h2", std, "HTTP/2.0"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, _ := http.NewRequest("GET", u, nil)
			buf := make([]byte, 16)
			do := func() {
				resp, err := bc.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.ReadFull(resp.Body, buf[:2])
				resp.Body.Read(buf)
				resp.Body.Close()
				if resp.Proto != bc.proto || n != 2 || string(buf[:2]) != "ok" {
					b.Fatalf("%s %d %q", resp.Proto, n, buf[:n])
				}
			}
			do()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				do()
			}
		})
	}
}
