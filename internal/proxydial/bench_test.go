package proxydial

import (
	"net/url"
	"testing"
)

// BenchmarkPoolKey measures the per-request cost of the proxy part of a
// pool key. Baseline: url.URL.String, which is what net/http puts in its key.
func BenchmarkPoolKey(b *testing.B) {
	for _, tc := range []struct {
		name string
		u    *url.URL
	}{
		{"no_credentials", &url.URL{Scheme: "http", Host: "proxy.example:3128"}},
		{"credentials", &url.URL{Scheme: "http", Host: "proxy.example:3128", User: url.UserPassword(testUser, testPassword)}},
	} {
		b.Run(tc.name+"/net_http_url_string", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if tc.u.String() == "" {
					b.Fatal("empty")
				}
			}
		})
		b.Run(tc.name+"/proxydial_KeyOf", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				k, err := KeyOf(tc.u)
				if err != nil || k == (Key{}) {
					b.Fatal(k, err)
				}
			}
		})
	}
}
