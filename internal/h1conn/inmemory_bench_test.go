package h1conn

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// BenchmarkKnownInMemory is the cost of recognising a request
// body known to be in memory (the inline-write decision), per body kind.
func BenchmarkKnownInMemory(b *testing.B) {
	pr, pw := io.Pipe()
	defer pw.Close()
	for _, c := range []struct {
		name string
		body io.Reader
		want bool
	}{
		{"NopCloser(strings.Reader)", io.NopCloser(strings.NewReader("x")), true},
		{"NopCloser(bytes.Buffer)", io.NopCloser(bytes.NewBufferString("x")), true},
		{"pipe", pr, false},
		{"NopCloser(pipe)", io.NopCloser(pr), false},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if isKnownInMemory(c.body) != c.want {
					b.Fatal("wrong verdict")
				}
			}
		})
	}
}
