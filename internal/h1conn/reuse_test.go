package h1conn

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// serveHeads reads each request head (and its Content-Length body) on c
// and answers it with the next of answers; it stops after the last one.
func serveHeads(c net.Conn, answers ...string) {
	br := bufio.NewReader(c)
	for _, a := range answers {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if _, err := io.WriteString(c, a); err != nil {
			return
		}
	}
}

// getOK sends a GET on pc and reads its body to its end, which hands pc
// back to its owner.
func getOK(t *testing.T, pc *testConn, url string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	resp, err := pc.roundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
		t.Fatalf("first response body %q, %v", b, err)
	}
	resp.Body.Close()
	if !pc.takeIdle() || !pc.Reused() {
		t.Fatal("the connection was not handed back for reuse after its response")
	}
}

const (
	answerOK  = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	answer408 = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
)

// TestReused408IsServerClosedIdle: a 408 as the first answer on a reused
// connection is what a server sends on a connection it closes while idle,
// so a replayable request fails with the retryable "server closed idle
// connection" instead of returning the 408; a request that cannot be
// replayed gets the 408 as its answer, as does any request on a fresh
// connection.
func TestReused408IsServerClosedIdle(t *testing.T) {
	srv := testpeer.StartRaw(t, func(n int, c net.Conn) { serveHeads(c, answerOK, answer408) })
	url := "http://" + srv.Addr() + "/"
	for _, tc := range []struct {
		name      string
		newReq    func() *http.Request
		wantRetry bool
	}{
		{"replayable-GET", func() *http.Request { r, _ := http.NewRequest("GET", url, nil); return r }, true},
		{"POST-without-GetBody", func() *http.Request {
			r, _ := http.NewRequest("POST", url, io.NopCloser(strings.NewReader("x")))
			r.ContentLength = 1
			return r
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := dialTestConn(t, testConfig(), srv.Addr())
			defer pc.Close()
			getOK(t, pc, url)
			req := tc.newReq()
			resp, err := pc.roundTrip(req)
			if !tc.wantRetry {
				if err != nil || resp.StatusCode != http.StatusRequestTimeout {
					t.Fatalf("got %v, %v; want the 408 itself", resp, err)
				}
				resp.Body.Close()
				return
			}
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got %s; want the retryable server-closed-idle error", resp.Status)
			}
			if !errors.Is(err, errServerClosedIdle) || !Retryable(true, req, err) {
				t.Fatalf("err = %v (retryable %v); want errServerClosedIdle, retryable", err, Retryable(true, req, err))
			}
		})
	}
	t.Run("fresh-connection", func(t *testing.T) {
		srv := testpeer.StartRaw(t, func(n int, c net.Conn) { serveHeads(c, answer408) })
		pc := dialTestConn(t, testConfig(), srv.Addr())
		defer pc.Close()
		req, _ := http.NewRequest("GET", "http://"+srv.Addr()+"/", nil)
		resp, err := pc.roundTrip(req)
		if err != nil || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("got %v, %v; want the 408 on a fresh connection", resp, err)
		}
		resp.Body.Close()
	})
}

// TestGiveBackFollowsKeepAlives: a connection obtained and given back
// unused returns to the pool as a reused connection, except under
// DisableKeepAlives, where it is closed and its slot released (the server
// sees it close) since no request may use it after its first.
func TestGiveBackFollowsKeepAlives(t *testing.T) {
	closed := make(chan struct{}, 2)
	srv := testpeer.StartRaw(t, func(n int, c net.Conn) {
		io.Copy(io.Discard, c) // until the client closes
		closed <- struct{}{}
	})
	for _, disable := range []bool{false, true} {
		cfg := testConfig()
		cfg.DisableKeepAlives = disable
		pc := dialTestConn(t, cfg, srv.Addr())
		pc.GiveBack()
		pc.mu.Lock()
		idle, closes, released := pc.idle, pc.closes, pc.released
		pc.mu.Unlock()
		if disable {
			if idle || closes != 1 || released != 1 {
				t.Fatalf("DisableKeepAlives: idle %v, closed %d, released %d; want closed and released once", idle, closes, released)
			}
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the server did not see the connection close")
			}
			continue
		}
		if !idle || closes != 0 || !pc.Reused() {
			t.Fatalf("keep-alives on: idle %v, closed %d, reused %v; want idle, open, reused", idle, closes, pc.Reused())
		}
		pc.Close()
		<-closed
	}
}
