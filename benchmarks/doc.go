// Package benchmarks compares ferry's transport with net/http's and with
// the fasthttp client (not a RoundTripper; the CPU anchor of
// PERFORMANCE.md) on HTTP/1.1 keep-alive GETs against a server in a child
// process. It is a separate module so that fasthttp never becomes a
// dependency of ferry itself.
//
// The client runs on every CPU but the last and the server child on the
// last (benchchild.PinApart; FERRY_BENCH_PIN=off disables it). For ratios,
// use BenchmarkPaired, whose clients take turns every ~50 ms:
//
//	cd benchmarks && go test -run '^$' -bench BenchmarkPaired -benchtime 200000x
//
// BenchmarkClient runs each client on its own for syscalls, context
// switches and allocations per request:
//
//	cd benchmarks && go test -run '^$' -bench BenchmarkClient -benchtime 1s -count 3
package benchmarks
