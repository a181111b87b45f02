package transport

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestEarlyCloseNoWriteWait: closing an HTTP/1.1 response body
// before its end, while the request body's writer is still blocked on the
// caller's body (the server answered without reading it), returns at once
// in net/http: persistConn.wroteRequest, the 50 ms wait for the writer, is
// only reached when the connection could be reused (alive && bodyEOF
// short-circuit first). ferry's h1Conn.finish called writeDone whatever
// reusable said, so since 9040e3f such a Close blocked maxWriteWait (50 ms)
// before it closed a connection that is not reused anyway. The transport's
// writeWaited hook counts the waits: none here. Go 1.27 builds drain on
// early Close (drain.go), which ends differently but must not wait either.
func TestEarlyCloseNoWriteWait(t *testing.T) {
	s := startRawServer(t, func(c *rawConn) {
		if _, err := http.ReadRequest(c.br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
		io.Copy(io.Discard, c) // until the client closes the connection
	})
	tr := New()
	defer tr.CloseIdleConnections()
	var waits atomic.Int32
	tr.writeWaited = func() { waits.Add(1) }
	for i := range 3 {
		pr, pw := io.Pipe() // a streamed body whose producer never writes
		req, err := http.NewRequest("POST", s.URL, pr)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		pw.CloseWithError(io.ErrClosedPipe)
	}
	if n := waits.Load(); n != 0 {
		t.Errorf("closing the response body early waited for the body writer %d times in 3 requests, want 0 as net/http: the connection is not reused", n)
	}
}
