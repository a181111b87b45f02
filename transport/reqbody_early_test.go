package transport

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Request bodies that look rewindable (GetBody set, small ContentLength)
// but are not in memory: a producer may wait for the response before it
// writes (a bidirectional exchange), so such a body must not be written on
// the caller's goroutine before the response is read. net/http writes
// every body on its write goroutine; ferry writes only bodies it knows to
// be in memory inline.

// fileBodyHang bounds a wait that only a defect makes long.
const fileBodyHang = 10 * time.Second

// zeroClient is the zero-value transport of impl ("nethttp" or "ferry"),
// the two clients the request-body tests run side by side.
func zeroClient(impl string) http.RoundTripper {
	if impl == "ferry" {
		return &Transport{}
	}
	return &http.Transport{}
}

// roundTripGuarded runs rt.RoundTrip(req) and waits for it up to
// fileBodyHang. If it has not returned by then, unblock is called (it must
// make RoundTrip return, e.g. by failing the body's producer), a response
// that still came is closed, and hung is true.
func roundTripGuarded(rt http.RoundTripper, req *http.Request, unblock func()) (resp *http.Response, hung bool, err error) {
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		return r.resp, false, r.err
	case <-time.After(fileBodyHang):
		unblock()
		r := <-done
		if r.err == nil {
			r.resp.Body.Close()
		}
		return nil, true, r.err
	}
}

// answerBeforeBody answers each request as soon as its head is read, then
// reads its body and reports it on bodies.
func answerBeforeBody(bodies chan<- string) func(c *rawConn) {
	return func(c *rawConn) {
		for {
			req, err := http.ReadRequest(c.br)
			if err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
			b, err := io.ReadAll(req.Body)
			if err != nil {
				bodies <- "read error: " + err.Error()
				return
			}
			bodies <- string(b)
		}
	}
}

// producedBody is a request body whose bytes are written only when the
// test says so (after RoundTrip returned): its reader, and the function
// that produces the bytes (or fails the body, to unblock a stuck reader).
type producedBody struct {
	body    io.ReadCloser
	produce func(s string)
	fail    func()
}

var producedBodies = []struct {
	name string
	make func(t *testing.T) producedBody
}{
	{"io.Pipe", func(t *testing.T) producedBody {
		pr, pw := io.Pipe()
		return producedBody{pr, func(s string) { io.WriteString(pw, s); pw.Close() },
			func() { pw.CloseWithError(errors.New("test: hang guard")) }}
	}},
	{"NopCloser(io.Pipe)", func(t *testing.T) producedBody {
		pr, pw := io.Pipe()
		t.Cleanup(func() { pr.Close() })
		return producedBody{io.NopCloser(pr), func(s string) { io.WriteString(pw, s); pw.Close() },
			func() { pw.CloseWithError(errors.New("test: hang guard")) }}
	}},
	{"os.Pipe", func(t *testing.T) producedBody {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pr.Close(); pw.Close() })
		return producedBody{pr, func(s string) { io.WriteString(pw, s); pw.Close() },
			func() { pw.Close() }}
	}},
}

// TestEarlyAnswerStreamingBody: a body with GetBody and a small
// ContentLength whose bytes come only after RoundTrip returned. The server
// answers on the head; net/http returns the response and then sends the
// body. ferry wrote such a body inline before reading the response and
// waited forever for bytes that would come only after it returned.
func TestEarlyAnswerStreamingBody(t *testing.T) {
	for _, pb := range producedBodies {
		t.Run(pb.name, func(t *testing.T) {
			var got [2]string
			for i, impl := range []string{"nethttp", "ferry"} {
				got[i] = earlyAnswerRun(t, impl, pb.make(t))
			}
			if got[0] != got[1] {
				t.Errorf("net/http: %s\nferry:    %s", got[0], got[1])
			}
		})
	}
}

func earlyAnswerRun(t *testing.T, impl string, pb producedBody) string {
	bodies := make(chan string, 4)
	srv := startRawServer(t, answerBeforeBody(bodies))
	rt := zeroClient(impl)
	defer closeIdle(rt)
	req, err := http.NewRequest("POST", srv.URL+"/duplex", pb.body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 5
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("hello")), nil }
	resp, hung, err := roundTripGuarded(rt, req, pb.fail)
	if hung {
		t.Fatalf("%s: RoundTrip did not return before the body's bytes were produced (body written before the response was read)", impl)
	}
	if err != nil {
		pb.fail()
		return "error: " + err.Error()
	}
	// The body goes out before the response is read to its end: a body
	// still being written then is cut short by both transports (ferry at
	// once, net/http after a grace period).
	pb.produce("hello")
	var out string
	select {
	case s := <-bodies:
		out = "server read " + s
	case <-time.After(fileBodyHang):
		resp.Body.Close()
		t.Fatalf("%s: the server never got the body", impl)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return out + fmt.Sprintf("; status %d body %q err %v", resp.StatusCode, b, err)
}

// ledgerBody is a request body that is not in memory as far as any
// transport can tell (a plain io.Reader in io.NopCloser).
type ledgerBody struct{ r io.Reader }

func (b ledgerBody) Read(p []byte) (int, error) { return b.r.Read(p) }

// closeAfterSecond serves connection 0: answers its first request, reads
// the second whole and closes without an answer (a server dropping a
// kept-alive connection as a request arrives). Every other connection is
// answered.
func closeAfterSecond(c *rawConn) {
	answer := func() bool {
		if _, err := c.readRequest(); err != nil {
			return false
		}
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return err == nil
	}
	if !answer() {
		return
	}
	if c.n == 0 {
		c.readRequest()
		return
	}
	for answer() {
	}
}

// TestReqBodyRetryAfterDrop: the retry of a request whose reused
// connection was dropped after the whole request went out, for a body in
// memory (written inline by ferry) and a body with GetBody that is not
// (written by ferry's body writer). net/http retries a replayable request
// (here PUT with Idempotency-Key) with GetBody and fails a POST; ferry must
// do the same whichever way it wrote the body.
func TestReqBodyRetryAfterDrop(t *testing.T) {
	for _, method := range []string{"PUT", "POST"} {
		for _, inMemory := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/inMemory=%v", method, inMemory), func(t *testing.T) {
				var got [2]string
				for i, impl := range []string{"nethttp", "ferry"} {
					got[i] = retryAfterDropRun(t, impl, method, inMemory)
				}
				if got[0] != got[1] {
					t.Errorf("net/http: %s\nferry:    %s", got[0], got[1])
				}
			})
		}
	}
}

func retryAfterDropRun(t *testing.T, impl, method string, inMemory bool) string {
	srv := startRawServer(t, closeAfterSecond)
	rt := zeroClient(impl)
	defer closeIdle(rt)
	resp, err := rt.RoundTrip(newReq(t, "GET", srv.URL+"/first", nil))
	if err != nil {
		t.Fatalf("%s: first request: %v", impl, err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()

	newBody := func() io.ReadCloser {
		if inMemory {
			return io.NopCloser(strings.NewReader("hello"))
		}
		return io.NopCloser(ledgerBody{strings.NewReader("hello")})
	}
	req, err := http.NewRequest(method, srv.URL+"/second", newBody())
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 5
	var getBody atomic.Int32
	req.GetBody = func() (io.ReadCloser, error) {
		getBody.Add(1)
		return newBody(), nil
	}
	if method == "PUT" {
		req.Header.Set("Idempotency-Key", "test")
	}
	resp, err = rt.RoundTrip(req)
	out := ""
	if err != nil {
		out = "error"
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = fmt.Sprintf("status %d %q", resp.StatusCode, b)
	}
	srv.mu.Lock()
	var seen []string
	for _, r := range srv.seen {
		seen = append(seen, r.Method+" "+r.URI+" "+r.Body)
	}
	srv.mu.Unlock()
	return fmt.Sprintf("%s; GetBody calls %d; connections %d; server saw %q", out, getBody.Load(), srv.connCount(), seen)
}
