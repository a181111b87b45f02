package transport

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
)

// A streaming request body (written by its own goroutine while the
// response is awaited) that fails on the caller's side: a length that
// differs from ContentLength, or a Close error. The server then waits for
// the rest of the body; the request must end with net/http's error
// instead of waiting with it.

// TestH1StreamBodyShort: a streaming body shorter than its
// ContentLength fails the request with net/http's error. Only the client's
// view is compared: both have sent what the body gave, and the server may
// or may not have read it by the time the comparison is made.
func TestH1StreamBodyShort(t *testing.T) {
	var got [2]any
	for i, rt := range []http.RoundTripper{settings{}.nethttp(nil), settings{}.ferry(nil)} {
		srv := startHandlerServer(t, hello, false, nil)
		got[i] = h1StreamPost("abc", 5, nil)(t, rt, srv)[0]
		closeIdle(rt)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("net/http: %+v\nferry:    %+v", got[0], got[1])
	}
}

// TestH1StreamBodyFailure: failures after which the server may
// have had the whole declared body, so that net/http returns either its
// answer or the error (a race between its writer and its reader), checked
// for ferry only against a server that never answers, which must not be
// waited for: a body longer than its ContentLength, and a body whose Close
// fails. The errors are net/http's texts.
func TestH1StreamBodyFailure(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		closeErr   error
		want       string
	}{
		{"longer-than-length", "abcdefgh", nil, "http: ContentLength=5 with Body length 8"},
		{"close-error", "abcde", errors.New("close failed"), "close failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRawServer(t, func(c *rawConn) {
				c.readRequest()
				<-c.s.close
			})
			tr := settings{}.ferry(nil)
			defer closeIdle(tr)
			o := h1StreamPost(tc.body, 5, tc.closeErr)(t, tr, srv)[0].(observation)
			if want := "error: net/http: HTTP/1.x transport connection broken: " + tc.want; o.Err != want {
				t.Errorf("got %q, want %q", o.Err, want)
			}
		})
	}
}
