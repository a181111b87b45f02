package transport

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A server that writes a second, unsolicited response on a connection
// after the client has finished the first one and pooled it. net/http's
// read loop sees bytes arrive on an idle connection, logs "Unsolicited
// response received on idle HTTP channel" and closes it, so the next
// request goes out on a new connection and gets its own answer. ferry has
// no reader on an idle connection: it reads the socket before reusing one
// that sat idle (fitForReuse, alive.go; the wait below makes it idle long
// enough), and before, a GET took the stale bytes as its response.

func TestUnsolicitedResponseWhileIdle(t *testing.T) {
	for _, method := range []string{"GET", "POST"} {
		for _, side := range []string{"nethttp", "ferry"} {
			t.Run(method+"/"+side, func(t *testing.T) {
				stressLeakCheck(t, func(t *testing.T) { stressUnsolicited(t, side, method) })
			})
		}
	}
}

func stressUnsolicited(t *testing.T, side, method string) {
	sendExtra := make(chan struct{})
	extraSent := make(chan struct{})
	srv := startRawServer(t, func(c *rawConn) {
		if c.n == 0 {
			if _, err := c.readRequest(); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			select {
			case <-sendExtra:
			case <-c.s.close:
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL")
			close(extraSent)
		}
		for {
			if _, err := c.readRequest(); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok2"); err != nil {
				return
			}
		}
	})
	std := &http.Transport{}
	var rt http.RoundTripper = std
	if side == "ferry" {
		rt = From(std)
	}
	defer closeIdle(rt)
	do := func(method string, body io.Reader) string {
		req := newReq(t, method, srv.URL, body)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s body: %v", method, err)
		}
		return string(b)
	}
	if got := do("GET", nil); got != "ok" {
		t.Fatalf("first response %q", got)
	}
	close(sendExtra)
	<-extraSent
	// Give a client that watches idle connections the time to see the
	// bytes and close the connection (net/http does at once); a client
	// that does not watch would wait here in vain, so the wait is bounded.
	deadline := time.Now().Add(time.Second)
	for srv.liveCount() > 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	var body io.Reader
	if method == "POST" {
		body = io.NopCloser(strings.NewReader("payload")) // not replayable
	}
	if got := do(method, body); got != "ok2" {
		t.Errorf("second %s got %q, want %q (its own response on a new connection)", method, got, "ok2")
	}
}
