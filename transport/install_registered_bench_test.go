package transport

import (
	"net/http"
	"testing"
)

// BenchmarkInstallRegisteredRoundTrip measures what adoption through
// http.DefaultTransport's RegisterProtocol costs per request: one HTTP/1.1
// GET on a reused connection to the benchmark server child, sent by ferry
// directly, by an adopted *http.Transport (net/http's RoundTrip prelude,
// the registered-protocol lookup and the settings compare, then ferry),
// and by net/http, in the same run. The adopted transport is a private
// one set up exactly as Install sets up http.DefaultTransport.
func BenchmarkInstallRegisteredRoundTrip(b *testing.B) {
	url := startBenchServer(b)
	benchServedGets(b, "ferry/h1", func() http.RoundTripper { return &Transport{MaxIdleConnsPerHost: 128} }, url, benchGet)
	benchServedGets(b, "ferry-adopted/h1", func() http.RoundTripper {
		std := &http.Transport{MaxIdleConnsPerHost: 128, ForceAttemptHTTP2: true}
		a, err := registerAdoption(std)
		if err != nil {
			b.Fatal(err)
		}
		setUpProtocols(std)
		a.install()
		return servedBy{std, a}
	}, url, benchGet)
	benchServedGets(b, "nethttp/h1", func() http.RoundTripper { return &http.Transport{MaxIdleConnsPerHost: 128} }, url, benchGet)
}

// servedBy is an adopted transport that checks, when its idle
// connections are closed at the end of a benchmark, that ferry served
// its requests.
type servedBy struct {
	*http.Transport
	a *adoption
}

func (s servedBy) CloseIdleConnections() {
	if c := s.a.cur.Load(); c == nil || c.t.Stats().Requests.H1 == 0 {
		panic("the adopted transport's requests did not go through ferry")
	}
	s.Transport.CloseIdleConnections()
}

// BenchmarkStdSnapshotCompare measures the per-request check that the
// adopted transport's settings are those ferry was built from.
func BenchmarkStdSnapshotCompare(b *testing.B) {
	std := &http.Transport{ForceAttemptHTTP2: true, Proxy: http.ProxyFromEnvironment}
	seen := snapshotOf(std)
	b.ReportAllocs()
	for b.Loop() {
		if !seen.matches(std) {
			b.Fatal("unchanged settings compared unequal")
		}
	}
}
