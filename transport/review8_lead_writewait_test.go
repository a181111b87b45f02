package transport

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestReview8LeadEarlyCloseNoWriteWait: closing an HTTP/1.1 response body
// before its end, while the request body's writer is still blocked on the
// caller's body (the server answered without reading it), returns at once
// in net/http: persistConn.wroteRequest, the 50 ms wait for the writer, is
// only reached when the connection could be reused (alive && bodyEOF
// short-circuit first). ferry's h1Conn.finish calls writeDone whatever
// reusable says, so since 9040e3f such a Close blocks maxWriteWait (50 ms)
// before it closes the connection that is not reused anyway; before, one
// yield.
//
// The check is a duration (the wait has no observable effect besides
// time): the fastest of five Closes must take less than 25 ms (half of
// maxWriteWait), which a loaded machine does not push a non-waiting Close
// past, while a waiting Close never gets under it. Go 1.27 builds drain
// on early Close (drain.go) and do not block here either way.
func TestReview8LeadEarlyCloseNoWriteWait(t *testing.T) {
	t.Skip("review8: h1Conn.finish waits up to maxWriteWait for the body writer even when the connection is not reused (early Close of the response body blocks 50 ms); net/http waits only when it would reuse the connection")
	s := startRawServer(t, func(c *rawConn) {
		if _, err := http.ReadRequest(c.br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
		io.Copy(io.Discard, c) // until the client closes the connection
	})
	for _, row := range []struct {
		name string
		rt   interface {
			http.RoundTripper
			CloseIdleConnections()
		}
	}{
		{"nethttp", &http.Transport{}},
		{"ferry", New()},
	} {
		t.Run(row.name, func(t *testing.T) {
			defer row.rt.CloseIdleConnections()
			fastest := time.Hour
			for i := range 5 {
				pr, pw := io.Pipe() // a streamed body whose producer never writes
				req, err := http.NewRequest("POST", s.URL, pr)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := row.rt.RoundTrip(req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				start := time.Now()
				resp.Body.Close()
				fastest = min(fastest, time.Since(start))
				pw.CloseWithError(io.ErrClosedPipe)
			}
			if fastest >= 25*time.Millisecond {
				t.Errorf("closing the response body early took at least %v (fastest of 5), want at once as net/http: finish waited for the body writer of a connection it closes", fastest)
			}
		})
	}
}
