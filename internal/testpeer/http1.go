package testpeer

import (
	"fmt"
	"strings"
)

// ChunkedResponse is an HTTP/1.1 200 response whose body of total bytes
// ('c') comes in chunks of at most chunk bytes, with a trailer "X-T: v"
// announced in the head when trailer.
func ChunkedResponse(total, chunk int, trailer bool) string {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n")
	if trailer {
		b.WriteString("Trailer: X-T\r\n")
	}
	b.WriteString("\r\n")
	for total > 0 {
		n := min(chunk, total)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, strings.Repeat("c", n))
		total -= n
	}
	b.WriteString("0\r\n")
	if trailer {
		b.WriteString("X-T: v\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}
