package h2conn

import (
	"io"
	"strings"
	"testing"
)

// BenchmarkReplayBody is what the HTTP/2 replay wrapper costs a
// request with a small body: wrap, read to EOF, the connection's Close, settle.
func BenchmarkReplayBody(b *testing.B) {
	var sr strings.Reader
	body := io.NopCloser(&sr)
	buf := make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		sr.Reset("hello")
		rb := NewReplayBody(body)
		for {
			if _, err := rb.Read(buf); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
		rb.Close()
		rb.Settle()
	}
}
