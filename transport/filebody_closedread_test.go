package transport

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"testing"
)

// TestBodyClosedByTransportNotCallers: a request body that is a
// file copied through user space (here hidden from sendfile behind a
// plain reader, closed through the file itself) to a server that resets
// the connection after the head. On the failure the transport closes the
// request body while its writer is still copying; the writer's next Read
// then fails with the file's "file already closed", which ferry tagged as
// the caller's body failing and, in about a third of runs, returned from
// RoundTrip instead of the connection's error. net/http returned the
// connection's error in every run. (Found while mutation-testing 826fd4b.)
// The writer now leaves a Read error alone once the exchange has stopped
// the body (h1Conn.bodyStopped).
func TestBodyClosedByTransportNotCallers(t *testing.T) {
	big := sparseFile(t, 64<<20)
	for _, impl := range []string{"nethttp", "ferry"} {
		for i := 0; i < 20; i++ {
			srv := startRawServer(t, func(c *rawConn) {
				if _, err := http.ReadRequest(c.br); err == nil {
					c.Conn.(*net.TCPConn).SetLinger(0)
				}
			})
			rt := zeroClient(impl)
			f, err := os.Open(big)
			if err != nil {
				t.Fatal(err)
			}
			body := struct {
				io.Reader
				io.Closer
			}{ledgerBody{f}, f}
			req, err := http.NewRequest("PUT", srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 64 << 20
			resp, err := rt.RoundTrip(req)
			f.Close()
			closeIdle(rt)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("%s: RoundTrip succeeded on a reset connection", impl)
			}
			var pe *fs.PathError
			if errors.As(err, &pe) {
				t.Fatalf("%s, run %d: error %v: the transport's own close of the body returned as the caller's error", impl, i, err)
			}
		}
	}
}
