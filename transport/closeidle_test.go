package transport

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"
)

// TestCloseIdleDuringRequest: as with net/http, a connection in use when
// CloseIdleConnections runs is closed when its request ends (PutIdleConn
// reports why), unless a newer request asked for a connection in between,
// which makes the transport keep connections again.
func TestCloseIdleDuringRequest(t *testing.T) {
	ok := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }
	for _, newerRequest := range []bool{false, true} {
		for _, impl := range []string{"nethttp", "ferry"} {
			name := impl + "/closed"
			if newerRequest {
				name = impl + "/kept-after-a-newer-request"
			}
			t.Run(name, func(t *testing.T) {
				srv := startHandlerServer(t, ok, false, nil)
				other := startHandlerServer(t, ok, false, nil)
				var rt http.RoundTripper = &http.Transport{}
				if impl == "ferry" {
					rt = &Transport{}
				}
				defer closeIdle(rt)
				putIdle := make(chan error, 1)
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					PutIdleConn: func(err error) { putIdle <- err },
				})
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				closeIdle(rt) // the connection is in use: not closed now
				if newerRequest {
					if o := observe(rt, newReq(t, "GET", other.URL, nil)); o.Status != 200 {
						t.Fatalf("request to the other server: %+v", o)
					}
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(body) != "hello" {
					t.Fatalf("body %q, err %v", body, err)
				}
				var putErr error
				select {
				case putErr = <-putIdle:
				case <-time.After(30 * time.Second):
					t.Fatal("PutIdleConn never fired")
				}
				if newerRequest != (putErr == nil) {
					t.Fatalf("PutIdleConn(%v), want an error: %v", putErr, !newerRequest)
				}
				if putErr != nil && putErr.Error() != errCloseIdle.Error() {
					t.Fatalf("PutIdleConn(%q), want %q", putErr, errCloseIdle)
				}
				if o := observe(rt, newReq(t, "GET", srv.URL, nil)); o.Status != 200 {
					t.Fatalf("second request: %+v", o)
				}
				conns := srv.connCount()
				want := 2
				if newerRequest {
					want = 1
				}
				if conns != want {
					t.Fatalf("server saw %d connections, want %d", conns, want)
				}
			})
		}
	}
}

// secondGetAfterIdle runs two GETs through net/http and through ferry
// against a scripted server whose first connection, once it has answered
// the first GET, runs afterFirst, which must call idle when the connection
// is in the state under test; every later connection answers "ok". The
// second GET starts after that and must get "ok" on a second connection.
func secondGetAfterIdle(t *testing.T, afterFirst func(c *rawConn, idle func())) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			idle := make(chan struct{}, 1)
			srv := startRawServer(t, func(c *rawConn) {
				for {
					if _, err := c.readRequest(); err != nil {
						return
					}
					io.WriteString(c, ok)
					if c.n == 0 {
						afterFirst(c, func() { idle <- struct{}{} })
						return
					}
				}
			})
			var rt http.RoundTripper = &http.Transport{}
			if impl == "ferry" {
				rt = &Transport{}
			}
			defer closeIdle(rt)
			if o := observe(rt, newReq(t, "GET", srv.URL, nil)); o.Status != 200 {
				t.Fatalf("first GET: %+v", o)
			}
			<-idle
			// Let what the server sent arrive and the poller see it while
			// the connection is idle (the case under test).
			time.Sleep(10 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			if o := observe(rt, req); o.Status != 200 || o.Body != "ok" {
				t.Fatalf("second GET: %+v", o)
			}
			conns := srv.connCount()
			if conns != 2 {
				t.Fatalf("server saw %d connections, want 2", conns)
			}
		})
	}
}

// TestHalfClosedIdleConn: a server that shuts its side of an idle
// keep-alive connection down (FIN) but keeps reading, and never answers on
// it again. The next GET finds the EOF on its first read and is retried on
// a new connection, as with net/http (whose reader saw the FIN while the
// connection was idle). A request that waits for the socket to become
// readable before its first read would never see that FIN: the poller had
// reported it while the connection was idle.
func TestHalfClosedIdleConn(t *testing.T) {
	secondGetAfterIdle(t, func(c *rawConn, idle func()) {
		c.Conn.(*net.TCPConn).CloseWrite()
		idle()
		io.Copy(io.Discard, c.br) // read on, answer nothing
	})
}

// TestIdle408Retried: a server that answers 408 on an idle keep-alive
// connection and closes it (its idle timeout) does not hand the 408 to the
// next GET: net/http drops the connection while it is idle, ferry on
// reading the 408 first thing on a reused connection; both retry on a new
// one.
func TestIdle408Retried(t *testing.T) {
	secondGetAfterIdle(t, func(c *rawConn, idle func()) {
		io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		idle() // returning closes the connection
	})
}

// TestCloseIdleHandsToWaiter: with MaxConnsPerHost, a request queued for a
// connection before CloseIdleConnections still gets the connection in use
// when that one's request ends (net/http's tryPutIdleConn serves waiters
// before it looks at closeIdle): no new dial. ferry only: the test waits
// for the queued request through ferry's Stats.
func TestCloseIdleHandsToWaiter(t *testing.T) {
	srv := startHandlerServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }, false, nil)
	tr := &Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(newReq(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan observation, 1)
	go func() { second <- observe(tr, newReq(t, "GET", srv.URL, nil)) }()
	waitFor(t, func() bool { return tr.Stats().Pool.Waits > 0 })
	if t.Failed() {
		t.FailNow() // the second request never queued
	}
	tr.CloseIdleConnections()
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "hello" {
		t.Fatalf("first body %q, %v", b, err)
	}
	resp.Body.Close()
	if o := <-second; o.Status != 200 || o.Body != "hello" {
		t.Fatalf("queued request: %+v", o)
	}
	conns := srv.connCount()
	if conns != 1 {
		t.Fatalf("server saw %d connections, want 1 (the queued request reuses the first)", conns)
	}
}
