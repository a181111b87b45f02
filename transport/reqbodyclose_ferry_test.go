package transport

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h3conn"
)

// Close counts on paths only ferry has, so no reference runs beside it:
// each body the request used is closed exactly once and no Read hangs.

// TestReqBodyClosedOnceSharedConnDiesBeforeOptions: the HTTP/2 connection dies
// after the request reserved its stream but before its socket options were
// applied (1a054dc): the request goes to another connection with its body
// untouched, and that body is closed once.
func TestReqBodyClosedOnceSharedConnDiesBeforeOptions(t *testing.T) {
	l := newProbeLedger(func() *probeBody { return newProbeBody("hello", probeEOF) })
	tr := getOnConnDyingBeforeOptions(t, l.body(), TOS(0x10))
	tr.CloseIdleConnections()
	waitFor(t, func() bool { return l.final() == "bodies 1; closes 1" })
	if got := l.final(); got != "bodies 1; closes 1" {
		t.Fatalf("%s, want the one body closed once", got)
	}
}

// TestReqBodyClosedOnceH3Unsent: a request its HTTP/3 connection could not send
// at all (the connection went away first) goes over TCP with the same,
// untouched body (GetBody or not), closed once there. (A request the
// HTTP/3 server refused unprocessed is TestReqBodyClosedOnceH3's rejected rows.)
func TestReqBodyClosedOnceH3Unsent(t *testing.T) {
	for _, getBody := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-getbody", true: "getbody"}[getBody], func(t *testing.T) {
			h3seen := &protoHandler{}
			srv, port := startH3Config(t, h3seen, nil)
			tcp := &protoHandler{}
			u := startTLS(t, tcp)
			spoil := false
			tr := newH3Transport(t, func(tr *Transport) {
				tr.h3.headStart = time.Minute
				tr.h3.beforeSend = func(c *h3conn.Conn) {
					if spoil {
						spoil = false
						srv.Close()
						eventually(t, "the client to see the close", func() bool { return !c.Usable() })
					}
				}
			})
			advertise(t, tr.altSvcCache(), u, altValue("", port))
			if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/3.0" {
				t.Fatalf("first request over %s, want HTTP/3.0", resp.Proto)
			}
			spoil = true
			l := newProbeLedger(func() *probeBody { return newProbeBody("hello", probeEOF) })
			req, err := http.NewRequest("POST", u+"/unsent", l.body())
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 5
			if getBody {
				req.GetBody = l.getBody
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("unsent request not retried: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.Proto != "HTTP/1.1" {
				t.Fatalf("retry over %s, want HTTP/1.1", resp.Proto)
			}
			tr.CloseIdleConnections()
			want := "bodies 1; closes 1" // the untouched body goes over TCP as it is
			waitFor(t, func() bool { return l.final() == want })
			if got := l.final(); got != want {
				t.Fatalf("%s, want %s", got, want)
			}
		})
	}
}
