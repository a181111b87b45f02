package benchmarks

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/transport"
)

// BenchmarkPairedTimeout/{g1,g64} measures what a timeout costs per
// request, in turns as BenchmarkPaired does, through http.Client: no
// timeout; a per-request context deadline (ctx); and http.Client.Timeout
// (client-timeout). net/http's Client gives its own Transport the context
// path for Client.Timeout, but any other RoundTripper, ferry's included,
// gets the legacy path: a Request.Cancel channel, a timer and a goroutine
// per request, and CancelRequest on expiry. Reported: <transport>-<mode>-
// cpu-ns/op, and ferry's CPU with Client.Timeout over net/http's
// (ferry/nethttp-client-timeout).
func BenchmarkPairedTimeout(b *testing.B) {
	addr := startServer(b)
	url := "http://" + addr + "/bench"
	for _, g := range []int{1, 64} {
		b.Run("g"+strconv.Itoa(g), func(b *testing.B) {
			ft := &transport.Transport{MaxIdleConnsPerHost: 128}
			nt := &http.Transport{MaxIdleConnsPerHost: 128}
			defer ft.CloseIdleConnections()
			defer nt.CloseIdleConnections()
			var clients []*pairedClient
			for _, tr := range []struct {
				name string
				rt   http.RoundTripper
			}{{"ferry", ft}, {"nethttp", nt}} {
				for _, mode := range []string{"none", "ctx", "client-timeout"} {
					c := &pairedClient{name: tr.name + "-" + mode, done: func() {}}
					for range g {
						c.ops = append(c.ops, timeoutDoer(b, tr.rt, url, mode))
					}
					clients = append(clients, c)
				}
			}
			perOp := runTurns(b, clients, 4*g, g)
			b.ReportMetric(perOp["ferry-client-timeout"]/perOp["nethttp-client-timeout"], "ferry/nethttp-client-timeout")
			b.ReportMetric(perOp["ferry-none"]/perOp["nethttp-none"], "ferry/nethttp-none")
		})
	}
}

// timeoutDoer returns one goroutine's GET through an http.Client on rt, with
// a one-minute timeout set as mode says ("none", "ctx", "client-timeout");
// every response is checked.
func timeoutDoer(b *testing.B, rt http.RoundTripper, url, mode string) func() {
	c := &http.Client{Transport: rt}
	if mode == "client-timeout" {
		c.Timeout = time.Minute
	}
	buf := make([]byte, 512)
	return func() {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if mode == "ctx" {
			ctx, cancel = context.WithTimeout(ctx, time.Minute)
		}
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := c.Do(req)
		checkResponse(b, resp, err, buf)
	}
}
