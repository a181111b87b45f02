package transport

import (
	"fmt"
	"io"
	"net/http"
	"testing"
)

// TestFailedAttemptClosesBodyOnce: a request whose body was written
// and whose connection then closed unanswered fails (not retried: a POST
// without an idempotency key); net/http closes the caller's body once.
//
// ferry closes it three times: the body writer (writeRequestBodySide),
// exchangeAsync to stop the writer, then RoundTrip's closeOutgoing. The fix
// (a close-once record the three share, without a per-request allocation)
// spans asyncbody.go, h1write.go and roundtrip.go.
func TestFailedAttemptClosesBodyOnce(t *testing.T) {
	for _, reused := range []bool{false, true} {
		var got [2]string
		for i, impl := range []string{"nethttp", "ferry"} {
			srv := startRawServer(t, func(c *rawConn) {
				if reused {
					answerOnceThenDrop(c)
					return
				}
				c.readRequest()
			})
			var rt http.RoundTripper = &http.Transport{}
			if impl == "ferry" {
				rt = &Transport{}
			}
			if reused {
				getOK(t, rt, t.Context(), srv.URL+"/")
			}
			var l bodyLedger
			req, _ := http.NewRequest("POST", srv.URL+"/p", l.body())
			req.ContentLength = 5
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			closeIdle(rt)
			got[i] = fmt.Sprintf("err=%v; %s", err != nil, l.summary())
		}
		if got[0] != got[1] {
			t.Errorf("reused=%v\nnet/http: %s\nferry:    %s", reused, got[0], got[1])
		}
	}
}

// TestBodyClosedOncePerRequestOnOneConn: successive requests with bodies
// on one kept-alive connection each have their body closed exactly once,
// as in net/http: the close-once record belongs to the request, not to
// the connection. Both a body written inline (small, with GetBody) and one
// written by the body writer (no GetBody) are covered.
func TestBodyClosedOncePerRequestOnOneConn(t *testing.T) {
	for _, inline := range []bool{true, false} {
		var got [2]string
		for i, impl := range []string{"nethttp", "ferry"} {
			srv := startHandlerServer(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
			}, false, nil)
			var rt http.RoundTripper = &http.Transport{}
			if impl == "ferry" {
				rt = &Transport{}
			}
			var l bodyLedger
			for range 3 {
				req, _ := http.NewRequest("POST", srv.URL+"/", l.body())
				req.ContentLength = 5
				if inline {
					req.GetBody = func() (io.ReadCloser, error) { return l.body(), nil }
				}
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatalf("%s: %v", impl, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			closeIdle(rt)
			if n := srv.connCount(); n != 1 {
				t.Fatalf("%s: %d connections, want 1 (the test needs one kept-alive connection)", impl, n)
			}
			got[i] = l.summary()
		}
		if got[0] != got[1] {
			t.Errorf("inline=%v\nnet/http: %s\nferry:    %s", inline, got[0], got[1])
		}
	}
}
