package server

import (
	"log"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// logWriteBound only tells a missing log line from a late one; a logged
// panic arrives within milliseconds.
const logWriteBound = 10 * time.Second

// signalledLog is an ErrorLog destination that signals each write (a
// log.Logger writes each line with one Write), so that a test can wait for
// a line written on the server's goroutine after the client has seen the
// response end, as net/http's HTTP/2 server does (RST_STREAM first).
type signalledLog struct {
	testpeer.SyncBuffer
	wrote chan struct{} // one token per write, never blocking the writer
}

func newSignalledLog() *signalledLog { return &signalledLog{wrote: make(chan struct{}, 16)} }

func (l *signalledLog) Write(p []byte) (int, error) {
	n, err := l.SyncBuffer.Write(p)
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// wait returns once a line has been written, or fails t after
// logWriteBound.
func (l *signalledLog) wait(t *testing.T) {
	t.Helper()
	select {
	case <-l.wrote:
	case <-time.After(logWriteBound):
		t.Fatalf("nothing written to ErrorLog within %v", logWriteBound)
	}
}

// TestErrorLogReceivesHandlerPanic checks that a panicking handler is
// reported to the http.Server's ErrorLog on every protocol in net/http's
// shape: "PREFIX: panic serving ADDR: VALUE" and the stack, the prefix
// naming the protocol as net/http's HTTP/2 server does ("http2:"). ADDR is
// the connection's address even when a middleware rewrote r.RemoteAddr
// (as a real-IP middleware does) before the panic.
func TestErrorLogReceivesHandlerPanic(t *testing.T) {
	for _, row := range []struct {
		p      protocol
		prefix string
	}{
		{h1, "http: "}, {h2, "http2: "}, {h3, "http3: "},
	} {
		t.Run(string(row.p), func(t *testing.T) {
			logged := newSignalledLog()
			hs := &http.Server{
				ErrorLog: log.New(logged, "test: ", 0),
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					r.RemoteAddr = "203.0.113.9:1"
					panic("boom")
				}),
			}
			st := startTLS(t, hs, nil)
			resp, err := newClient(t, row.p).Get(st.url("/"))
			if err == nil {
				resp.Body.Close()
			}
			logged.wait(t)
			st.srv.Close()
			st.waitServe()
			got := logged.String()
			want := "test: " + row.prefix + "panic serving 127.0.0.1:"
			if !strings.HasPrefix(got, want) || !strings.Contains(got, ": boom\ngoroutine ") {
				t.Fatalf("ErrorLog got %q, want %q...\": boom\" and the stack", got, want)
			}
			if strings.Count(got, "panic serving") != 1 {
				t.Fatalf("ErrorLog got %q, want the panic once", got)
			}
		})
	}
}

// TestHandlerPanicAbortsResponse checks that a panicking handler's
// response is aborted (net/http closes the HTTP/1.1 connection; quic-go
// resets the HTTP/3 stream): the client sees an error, never a complete
// response. A panic with http.ErrAbortHandler is not logged; another value
// is, once. Both rows log before the client sees the abort, so the log is
// complete when the second request fails; net/http's HTTP/2 resets the
// stream before it logs and is left out.
func TestHandlerPanicAbortsResponse(t *testing.T) {
	for _, p := range []protocol{h1, h3} {
		t.Run(string(p), func(t *testing.T) {
			logged := newSignalledLog()
			hs := &http.Server{
				ErrorLog: log.New(logged, "", 0),
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/abort" {
						panic(http.ErrAbortHandler)
					}
					panic("sentinel")
				}),
			}
			st := startTLS(t, hs, nil)
			c := newClient(t, p)
			for _, path := range []string{"/abort", "/value"} {
				resp, err := c.Get(st.url(path))
				if err == nil {
					resp.Body.Close()
					t.Fatalf("%s: got a %d response, want the request aborted", path, resp.StatusCode)
				}
			}
			if got := logged.String(); strings.Count(got, "panic serving") != 1 || !strings.Contains(got, ": sentinel\n") {
				t.Fatalf("ErrorLog %q, want only the sentinel panic, once", got)
			}
		})
	}
}
