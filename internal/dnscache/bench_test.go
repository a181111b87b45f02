package dnscache

import (
	"net/http/httptrace"
	"testing"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// BenchmarkLookup: a cache hit, a hit with DNS trace hooks, an IP literal,
// and the baseline twin — the same name resolved by net.Resolver against the
// same loopback DNS server on every call (what an uncached dial pays).
func BenchmarkLookup(b *testing.B) {
	srv := dnstest.Start(b)
	srv.Set("bench.ferry.test", "127.0.0.1", "::1")
	c := New(Config{Resolver: srv.Resolver()})
	if _, err := c.LookupNetIP(b.Context(), "bench.ferry.test"); err != nil {
		b.Fatal(err)
	}
	b.Run("cache_hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			got, err := c.LookupNetIP(b.Context(), "bench.ferry.test")
			if err != nil || len(got) != 2 {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("cache_hit_traced", func(b *testing.B) {
		ctx := httptrace.WithClientTrace(b.Context(), &httptrace.ClientTrace{
			DNSStart: func(httptrace.DNSStartInfo) {},
			DNSDone:  func(httptrace.DNSDoneInfo) {},
		})
		b.ReportAllocs()
		for b.Loop() {
			got, err := c.LookupNetIP(ctx, "bench.ferry.test")
			if err != nil || len(got) != 2 {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("ip_literal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			got, err := c.LookupNetIP(b.Context(), "127.0.0.1")
			if err != nil || len(got) != 1 {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("uncached_resolver", func(b *testing.B) {
		r := srv.Resolver()
		b.ReportAllocs()
		for b.Loop() {
			got, err := r.LookupNetIP(b.Context(), "ip", "bench.ferry.test")
			if err != nil || len(got) != 2 {
				b.Fatal(got, err)
			}
		}
	})
}
