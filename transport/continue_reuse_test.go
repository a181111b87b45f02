package transport

import (
	"testing"
	"time"
)

// TestExpectContinueConnReuse: a request with "Expect: 100-continue" over HTTP/1.1
// whose body ferry writes on its body writer goroutine (a streamed body, or
// a body with GetBody that is not a reader known to be in memory),
// followed by a GET that should reuse the connection, as with net/http.
//
// final-keepalive: the server answers with a final status at once and
// keeps the connection, so the client must send the body for the
// connection's framing. net/http sends it after the answer (its writer
// goroutine) and, at the response body's EOF, waits for that write up to
// 50 ms (persistConn.wroteRequest) before reusing the connection: the
// server reads the whole body and the GET reuses the connection.
//
// send-100, no-100-timeout, timeout-zero: the server read the whole body
// before it answered, but the writer may not have reported its end when
// the answer's EOF is read.
//
// ferry's h1Conn.writeDone gave the writer one yield only, then closed the
// connection and the body: the server saw nothing or a truncated body and
// the GET dialled again (final-keepalive every time, the others now and
// then). It now waits up to 50 ms too (maxWriteWait). Each scenario runs up
// to 20 times, as the outcome was a race.
func TestExpectContinueConnReuse(t *testing.T) {
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
					compareCloses(t, [2]string{"nethttp", "ferry"}, continueBody, continueScenario("h1", tc.mode, tc.timeout, streamed, true), "", "")
				}
			})
		}
	}
}
