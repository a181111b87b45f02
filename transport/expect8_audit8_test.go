package transport

import (
	"testing"
	"time"
)

// TestExpect8H1Reuse: a request with "Expect: 100-continue" over HTTP/1.1
// whose body ferry writes on its body writer goroutine (a streamed body;
// with the working tree of this session also a body with GetBody that is
// not a reader known to be in memory), followed by a GET that should reuse
// the connection, as with net/http.
//
// final-keepalive: the server answers with a final status at once and
// keeps the connection, so the client must send the body for the
// connection's framing. net/http sends it after the answer (its writer
// goroutine) and, at the response body's EOF, waits for that write up to
// 50 ms (persistConn.wroteRequest) before reusing the connection: the
// server reads the whole body and the GET reuses the connection. ferry
// starts its body writer after reading the final answer, and at the
// response body's EOF h1Conn.writeDone gives the writer one yield only,
// then closes the connection and the body: the server sees nothing or a
// truncated chunked body and the GET dials a new connection (streamed:
// every run of 10 here).
//
// send-100, no-100-timeout, timeout-zero: the server read the whole body
// before it answered, but ferry's writer may not have reported its end
// when the answer's EOF is read; writeDone's one yield then loses and the
// connection is dropped (once in about 30 runs under -race at first; later
// in the session, with other helpers' changes in the tree, 4 of these 6
// scenarios lost within 20 tries; the same race exists for any body on the
// writer goroutine, Expect or not).
//
// The fix is in h1conn.go/asyncbody.go (not this helper's files):
// writeDone should wait for the writer up to 50 ms, as net/http does,
// before closing the connection and the body. Each scenario runs up to 20
// times, as the outcome is a race.
func TestExpect8H1Reuse(t *testing.T) {
	t.Skip("audit8: ferry drops an HTTP/1.1 connection when its body writer has not reported by the answer's EOF (writeDone yields once; net/http waits up to 50 ms): always after a final answer without 100 on a kept connection, sometimes otherwise")
	for _, tc := range []struct {
		name    string
		mode    expectMode
		timeout time.Duration
	}{
		{"final-keepalive", expectFinalKeep, time.Minute},
		{"send-100", expectSend100, time.Minute},
		{"no-100-timeout", expectWaitBody, 50 * time.Millisecond},
		{"timeout-zero", expectWaitBody, 0},
	} {
		for _, streamed := range []bool{true, false} {
			name := tc.name + "/getbody"
			if streamed {
				name = tc.name + "/streamed"
			}
			t.Run(name, func(t *testing.T) {
				for i := 0; i < 20 && !t.Failed(); i++ {
					compareCloses(t, [2]string{"nethttp", "ferry"}, expect8Body, expect8Scenario("h1", tc.mode, tc.timeout, streamed, true), "", "")
				}
			})
		}
	}
}
