package h1conn

import (
	"fmt"
	"strconv"
	"testing"
)

// benchHead is a response head of nh fields, as the transport benchmarks'
// server sends (Content-Length, Content-Type, then X-Bench-Header-N).
func benchHead(nh int) string {
	s := "HTTP/1.1 200 OK\r\nContent-Length: 64\r\nContent-Type: text/plain\r\n"
	for i := 2; i < nh; i++ {
		s += fmt.Sprintf("X-Bench-Header-%d: value-%d\r\n", i, i)
	}
	return s + "\r\n"
}

// BenchmarkParseHeader measures parsing response header blocks of 4, 16
// and 24 fields with the map pre-sized from the moving average (as
// connections do) against no pre-sizing.
func BenchmarkParseHeader(b *testing.B) {
	for _, n := range []int{4, 16, 24} {
		head := benchHead(n)
		_, fields := nextLine(head)
		b.Run("n="+strconv.Itoa(n)+"/moving-average", func(b *testing.B) {
			pc := &Conn{cfg: testConfig()}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				h, k, err := parseHeaderFields(fields, (pc.hdrEstimate+15)/16)
				if err != nil || len(h) != n {
					b.Fatal(err, len(h))
				}
				pc.learnHeaderCount(k)
			}
		})
		b.Run("n="+strconv.Itoa(n)+"/no-presize", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				h, _, err := parseHeaderFields(fields, 0)
				if err != nil || len(h) != n {
					b.Fatal(err, len(h))
				}
			}
		})
	}
}
