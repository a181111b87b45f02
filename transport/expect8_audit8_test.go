package transport

import (
	"testing"
	"time"
)

// TestExpect8FinalKeepAliveStreamed: the server answers a request with
// "Expect: 100-continue" and a streamed (chunked) body with a final status
// at once and keeps the connection, so the client must send the body for
// the connection's framing. net/http sends it after the answer (its writer
// goroutine) and, at the response body's EOF, waits for that write up to
// 50 ms (persistConn.wroteRequest) before reusing the connection: the
// server reads the whole body and the next request reuses the connection.
//
// ferry starts its body writer after reading the final answer, and at the
// response body's EOF h1Conn.writeDone gives the writer one yield only, then
// closes the connection and the body: the server sees a truncated chunked
// body and the next request dials a new connection. The fix is in
// h1conn.go/asyncbody.go (not this helper's files): writeDone should wait
// for the writer up to 50 ms, as net/http does, before closing the
// connection. (An in-memory body is written inline and matches.) Whether
// ferry's writer finishes within its one yield is a race (it lost in 2 to
// 4 runs of 10 here), so the scenario runs up to 20 times.
func TestExpect8FinalKeepAliveStreamed(t *testing.T) {
	t.Skip("audit8: after a final answer without 100 on a kept connection, ferry cuts the streamed body and closes the connection (writeDone does not wait for the writer; net/http waits up to 50 ms)")
	for i := 0; i < 20 && !t.Failed(); i++ {
		compareCloses(t, [2]string{"nethttp", "ferry"}, expect8Body, expect8Scenario("h1", expectFinalKeep, time.Minute, true), "", "")
	}
}
