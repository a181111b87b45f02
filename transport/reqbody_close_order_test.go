package transport

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// The response arrives while a slow upload is still being written, and the
// caller is done with it: the request body is closed only after the body
// writer's Read in progress returned, never during it, as net/http closes
// it (from its writer). Instrumentation that counts a body's bytes when it
// is closed (otelhttp's request size) then sees them all.
func TestReqBodyCloseWaitsForReadMatchesNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		length int64 // ContentLength: 2048, or -1 (chunked)
		early  bool  // the caller closes the response body before its end
	}{
		{"known-length", 2048, false},
		{"chunked", -1, false},
		{"known-length-early-close", 2048, true},
		{"chunked-early-close", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for i := range got {
				got[i] = closeDuringReadRun(t, i == 1, tc.length, tc.early)
			}
			if got[0] != got[1] {
				t.Errorf("request body\nnet/http: %s\nferry:    %s", got[0], got[1])
			}
			if want := "close during read: false, bytes read at close: 2048, closes: 1"; got[1] != want {
				t.Errorf("ferry: %s, want %s", got[1], want)
			}
		})
	}
}

// blockingBody yields 1024 bytes, then blocks in its second Read until
// release is closed, yields 1024 more, then io.EOF. It records whether
// Close came while a Read ran, and the bytes read when it was closed.
type blockingBody struct {
	inSecond chan struct{} // closed when the second Read starts
	release  chan struct{}
	closed   chan struct{} // closed by the first Close

	mu          sync.Mutex // guards the fields below
	reads       int
	reading     bool
	total       int
	closes      int
	closeInRead bool
	atClose     int
}

func newBlockingBody() *blockingBody {
	return &blockingBody{inSecond: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.reads++
	n := b.reads
	b.reading = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.reading = false
		b.mu.Unlock()
	}()
	switch n {
	case 1:
	case 2:
		close(b.inSecond)
		<-b.release
	default:
		return 0, io.EOF
	}
	if len(p) > 1024 {
		p = p[:1024]
	}
	for i := range p {
		p[i] = 'b'
	}
	b.mu.Lock()
	b.total += len(p)
	b.mu.Unlock()
	return len(p), nil
}

func (b *blockingBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closes++
	if b.closes == 1 {
		b.closeInRead = b.reading
		b.atClose = b.total
		close(b.closed)
	}
	return nil
}

func (b *blockingBody) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("close during read: %v, bytes read at close: %d, closes: %d", b.closeInRead, b.atClose, b.closes)
}

// closeDuringReadRun posts a blockingBody to a server that reads its first
// 1024 bytes and answers; once the writer is inside the blocked Read, the
// caller reads the response (to its end, or closes it early), the Read is
// released, and the body's record is returned once it was closed.
func closeDuringReadRun(t *testing.T, ferry bool, length int64, early bool) string {
	srv := startRawServer(t, func(c *rawConn) {
		req, err := http.ReadRequest(c.br)
		if err != nil {
			return
		}
		buf := make([]byte, 1024)
		if _, err := io.ReadFull(req.Body, buf); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		<-c.s.close // reads nothing more, closes at the end of the test
	})
	var rt http.RoundTripper = &http.Transport{}
	if ferry {
		rt = From(&http.Transport{})
	}
	defer closeIdle(rt)
	body := newBlockingBody()
	req := newReq(t, "POST", srv.URL, nil)
	req.Body = body
	req.ContentLength = length
	resp, err := rt.RoundTrip(req)
	if err != nil {
		close(body.release)
		return "RoundTrip: " + err.Error()
	}
	<-body.inSecond
	if !early {
		io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	// Give each transport time to give up the upload (ferry waits 50ms
	// for its writer at the end of a response, net/http closes the
	// connection on its read loop) while the Read still blocks.
	time.Sleep(100 * time.Millisecond)
	close(body.release)
	select {
	case <-body.closed:
	case <-time.After(10 * time.Second):
		return "body not closed"
	}
	// A second close, if any, would come right after the first.
	time.Sleep(20 * time.Millisecond)
	return body.String()
}
