package transport

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h1conn"
)

// A request body of unknown length (ContentLength 0, a Body that is not
// http.NoBody) on a method that usually has no body (GET, HEAD, DELETE,
// OPTIONS...) is probed as net/http probes it: found empty, the request
// goes without a body and without Transfer-Encoding; not empty, chunked.
// Other methods (POST) are sent chunked without a probe. The bytes the
// server receives are compared with net/http's, byte for byte.
func TestUnknownLengthBodyWireMatchesNetHTTP(t *testing.T) {
	bodies := []struct {
		name string
		body func() io.ReadCloser
	}{
		{"empty-stream", func() io.ReadCloser { return io.NopCloser(&streamBody{strings.NewReader("")}) }},
		{"empty-in-memory", func() io.ReadCloser { return io.NopCloser(strings.NewReader("")) }},
		{"one-byte-stream", func() io.ReadCloser { return io.NopCloser(&streamBody{strings.NewReader("x")}) }},
		{"stream", func() io.ReadCloser { return io.NopCloser(&streamBody{strings.NewReader("some body")}) }},
		{"in-memory", func() io.ReadCloser { return io.NopCloser(strings.NewReader("some body")) }},
		{"data-then-error", func() io.ReadCloser { return io.NopCloser(io.MultiReader(strings.NewReader("y"), errReader{})) }},
		{"error-at-once", func() io.ReadCloser { return io.NopCloser(errReader{}) }},
		// The first Read outlasts the probe's wait: chunked, and the byte
		// read late is the first chunk.
		{"slow-first-read", func() io.ReadCloser {
			return io.NopCloser(&slowFirstRead{r: strings.NewReader("late body"), d: h1conn.ProbeWait + 100*time.Millisecond})
		}},
		{"slow-first-read-empty", func() io.ReadCloser {
			return io.NopCloser(&slowFirstRead{r: strings.NewReader(""), d: h1conn.ProbeWait + 100*time.Millisecond})
		}},
	}
	for _, method := range []string{"GET", "DELETE", "POST"} {
		for _, b := range bodies {
			t.Run(method+"/"+b.name, func(t *testing.T) {
				var wire [2]string
				var errs [2]string
				for i := range wire {
					wire[i], errs[i] = unknownLengthWire(t, i == 1, method, b.body)
				}
				if wire[0] != wire[1] {
					t.Errorf("the server received\nnet/http: %q\nferry:    %q", wire[0], wire[1])
				}
				if errs[0] != errs[1] {
					t.Errorf("RoundTrip error\nnet/http: %q\nferry:    %q", errs[0], errs[1])
				}
			})
		}
	}
}

// errReader fails every Read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrClosedPipe }

// slowFirstRead waits d before its first Read.
type slowFirstRead struct {
	r     io.Reader
	d     time.Duration
	slept bool
}

func (s *slowFirstRead) Read(p []byte) (int, error) {
	if !s.slept {
		s.slept = true
		time.Sleep(s.d)
	}
	return s.r.Read(p)
}

// unknownLengthWire sends one request with body (ContentLength 0) through
// net/http's transport or ferry's and returns what the server read on the
// connection up to the end of the request (the port in Host removed) and
// the RoundTrip error, if any.
func unknownLengthWire(t *testing.T, ferry bool, method string, body func() io.ReadCloser) (string, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex // guards wire
	var wire bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var got bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &got))
		req, err := http.ReadRequest(br)
		if err == nil {
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		}
		// What the client wrote up to the end of the request (the reader
		// reads no further: the client waits for the answer), or up to
		// its close after a failed request.
		got.Truncate(got.Len() - br.Buffered())
		mu.Lock()
		wire.Write(got.Bytes())
		mu.Unlock()
	}()
	var rt http.RoundTripper = &http.Transport{}
	if ferry {
		rt = From(&http.Transport{})
	}
	defer closeIdle(rt)
	req := newReq(t, method, "http://"+ln.Addr().String()+"/", nil)
	req.Body = body()
	req.ContentLength = 0
	errText := ""
	resp, err := rt.RoundTrip(req)
	if err != nil {
		errText = err.Error()
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// The server ends once the client closed the connection (a failed
	// request) or was answered; a client that never connected leaves it
	// in Accept, which closing the listener ends.
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		ln.Close()
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	return strings.ReplaceAll(wire.String(), ln.Addr().String(), "HOST"), errText
}
