// Package benchmarks compares ferry's transport with net/http's and with
// the fasthttp client (not a RoundTripper; the CPU anchor of
// PERFORMANCE.md) on HTTP/1.1 keep-alive GETs against a server in a child
// process. It is a separate module so that fasthttp never becomes a
// dependency of ferry itself.
//
//	cd benchmarks && go test -run '^$' -bench . -benchtime 1s -count 4
package benchmarks
