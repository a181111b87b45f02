package transport

import (
	"net/http"
	"testing"
	"time"
)

// "Expect: 100-continue" on a request whose body is http.NoBody: net/http
// waits for the 100 (or the answer) all the same, with Wait100Continue, and
// reports WroteRequest once the answer let the (empty) body go.
var h1ContinueRows = []scenario{
	{name: "continue/nobody", set: settings{ExpectContinueTimeout: time.Minute}, handler: hello,
		run: tracedLanes(h1ContinueLanes, []string{
			"GetConn", "ConnectStart", "ConnectDone(false)", "GotConn(reused=false,wasIdle=false)",
			"WroteHeaderField(Host=HOST)", "WroteHeaderField(User-Agent=Go-http-client/1.1)",
			"WroteHeaderField(Content-Length=0)", "WroteHeaderField(Expect=100-continue)",
			"WroteHeaderField(Accept-Encoding=gzip)", "WroteHeaders", "Wait100Continue",
			"GotFirstResponseByte", "WroteRequest(false)", "PutIdleConn(<nil>)",
		}, nil, one("POST", "/", nil, func(r *http.Request) {
			r.Body = http.NoBody
			r.Header.Set("Expect", "100-continue")
		}))},
	{name: "continue/nobody-answered-100", set: settings{ExpectContinueTimeout: time.Minute}, raw: func(c *rawConn) {
		c.readRequest()
		c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		<-c.s.close
	}, run: tracedLanes(h1ContinueLanes, []string{
		"GetConn", "ConnectStart", "ConnectDone(false)", "GotConn(reused=false,wasIdle=false)",
		"WroteHeaderField(Host=HOST)", "WroteHeaderField(User-Agent=Go-http-client/1.1)",
		"WroteHeaderField(Content-Length=0)", "WroteHeaderField(Expect=100-continue)",
		"WroteHeaderField(Accept-Encoding=gzip)", "WroteHeaders", "Wait100Continue",
		"GotFirstResponseByte", "Got100Continue", "Got1xx(100)", "WroteRequest(false)", "PutIdleConn(<nil>)",
	}, nil, one("POST", "/", nil, func(r *http.Request) {
		r.Body = http.NoBody
		r.Header.Set("Expect", "100-continue")
	}))},
}

func TestH1ExpectContinue(t *testing.T) {
	runH1Rows(t, h1ContinueRows)
}
