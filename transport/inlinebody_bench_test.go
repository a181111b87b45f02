package transport

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkInlineBodyLoopbackPOST is a POST with a body in memory
// (bytes.Reader, GetBody set) over a real loopback socket with the kernel's
// default buffers, where ferry writes bodies up to 64 KiB inline (the
// connection's bound is read once, on the first request); GET is the
// bodyless baseline. BenchmarkRoundTripInMemory's connections are not
// sockets, so its POST rows go to the body writer (bound 0); this is the
// socket-backed twin. The server parses each head and discards the body
// without allocating, so allocs/op are the client's.
func BenchmarkInlineBodyLoopbackPOST(b *testing.B) {
	addr := startInlineBenchServer(b)
	for _, impl := range []string{"ferry", "nethttp"} {
		for _, size := range []int{0, 1 << 10, 64 << 10} {
			name := fmt.Sprintf("%s/POST-%dKiB", impl, size>>10)
			if size == 0 {
				name = impl + "/GET"
			}
			b.Run(name, func(b *testing.B) {
				var rt http.RoundTripper = &Transport{}
				if impl == "nethttp" {
					rt = &http.Transport{}
				}
				defer closeIdle(rt)
				payload := bytes.Repeat([]byte("x"), size)
				br := bytes.NewReader(payload)
				method, body := "GET", io.Reader(nil)
				if size > 0 {
					method, body = "POST", br
				}
				req, err := http.NewRequest(method, "http://"+addr+"/", body)
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, 16)
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					br.Reset(payload)
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.ReadFull(resp.Body, buf[:2])
					resp.Body.Close()
					if resp.StatusCode != 200 || string(buf[:n]) != "ok" {
						b.Fatalf("status %d body %q", resp.StatusCode, buf[:n])
					}
				}
			})
		}
	}
}

// startInlineBenchServer runs a loopback HTTP/1.1 server that reads each
// request head and Content-Length body and answers "200 ok", allocating
// nothing per request.
func startInlineBenchServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	serveRaw(b, ln, func(c *rawConn) { serveInlineBench(c.Conn) })
	return ln.Addr().String()
}

func serveInlineBench(c net.Conn) {
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	clKey := []byte("content-length:")
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		n := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			if len(line) > len(clKey) && bytes.EqualFold(line[:len(clKey)], clKey) {
				v := bytes.TrimSpace(line[len(clKey):])
				for _, d := range v {
					n = n*10 + int(d-'0')
				}
			}
		}
		if _, err := br.Discard(n); err != nil {
			return
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}
