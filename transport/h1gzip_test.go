package transport

import (
	"bytes"
	"compress/gzip"
	"io"
	"strconv"
	"testing"
	"time"
)

// TestH1GzipConcurrentRead: two Reads at once of a transparently
// decompressed body: net/http's second Read fails with "http: concurrent
// read on response body" instead of sharing the decoder (which would be a
// data race). The server sends the gzip header and one flushed block, then
// waits: the first Read to reach the decoder blocks there, and the other
// must fail at once, whichever of the two comes first.
func TestH1GzipConcurrentRead(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("hello"))
	zw.Flush()
	first := gz.Len()
	zw.Write([]byte(" world"))
	zw.Close()
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			release := make(chan struct{})
			srv := startRawServer(t, func(c *rawConn) {
				c.readRequest()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: "+strconv.Itoa(gz.Len())+"\r\n\r\n")
				c.Write(gz.Bytes()[:first])
				<-release
				c.Write(gz.Bytes()[first:])
			})
			rt := settings{}.nethttp(nil)
			if impl == "ferry" {
				rt = settings{}.ferry(nil)
			}
			defer closeIdle(rt)
			resp, err := rt.RoundTrip(newReq(t, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 5)
			if n, err := io.ReadFull(resp.Body, buf); n != 5 || err != nil {
				t.Fatalf("first read: %d %v", n, err)
			}
			type result struct {
				b   []byte
				err error
			}
			results := make(chan result, 2)
			for i := 0; i < 2; i++ {
				go func() {
					p := make([]byte, 64)
					n, err := resp.Body.Read(p)
					results <- result{p[:n], err}
				}()
			}
			select {
			case r := <-results:
				if r.err == nil || r.err.Error() != "http: concurrent read on response body" {
					t.Errorf("the Read that came second returned %q, %v", r.b, r.err)
				}
			case <-time.After(time.Minute):
				t.Error("neither Read returned") // hang guard
			}
			close(release)
			if r := <-results; r.err != nil && r.err != io.EOF || len(r.b) == 0 {
				t.Errorf("the blocked Read returned %q, %v", r.b, r.err)
			}
		})
	}
}
