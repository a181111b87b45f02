package h2conn

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// writeCounter is a connection that counts its Write calls: each is one
// write to the socket.
type writeCounter struct {
	net.Conn
	writes atomic.Int64
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(p)
}

// closeRecorder is a request body that records its Close.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeRecorder) Close() error { b.closed.Store(true); return nil }

// inMemoryBody wraps data as the transport hands a NewRequest body to the
// connection: a ReplayBody marked as held in memory.
func inMemoryBody(data []byte) (*ReplayBody, *closeRecorder) {
	rec := &closeRecorder{Reader: bytes.NewReader(data)}
	rb := NewReplayBody(rec)
	rb.MarkInMemory()
	return rb, rec
}

// echoLengthServer answers every request with its body's length and hash.
func echoLengthServer(t *testing.T, h2 *http.HTTP2Config) *testServer {
	return startServer(t, false, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		fmt.Fprintf(w, "%d %x", len(b), sha(b))
	}))
}

// countedConn dials s through a writeCounter and waits for the server's
// SETTINGS (so that later writes are the requests' own).
func countedConn(t *testing.T, s *testServer) (*Conn, *writeCounter) {
	t.Helper()
	wc := &writeCounter{Conn: dialH2(t, s.addr(), false)}
	c, err := NewClientConn(wc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	resp, err := c.RoundTrip(newRequest(t, "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	waitFor(t, "the server's SETTINGS", func() bool { return peerSettingsKnown(c) })
	return c, wc
}

// postCounted POSTs body (of len(data) bytes) on c and returns how many
// socket writes the exchange took; the server must have read data.
func postCounted(t *testing.T, c *Conn, wc *writeCounter, url string, body io.ReadCloser, data []byte, trace *httptrace.ClientTrace) int64 {
	t.Helper()
	req := newRequest(t, "POST", url, nil)
	req.Body, req.ContentLength = body, int64(len(data))
	if trace != nil {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	before := wc.writes.Load()
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, resp)
	if want := fmt.Sprintf("%d %x", len(data), sha(data)); got != want {
		t.Fatalf("server read %q, want %q", got, want)
	}
	return wc.writes.Load() - before
}

func TestInMemoryBodyGoesWithHeadersInOneWrite(t *testing.T) {
	s := echoLengthServer(t, nil)
	c, wc := countedConn(t, s)
	data := []byte(strings.Repeat("b", 1000))

	rb, rec := inMemoryBody(data)
	var mu sync.Mutex
	var events []string
	note := func(e string) func() {
		return func() { mu.Lock(); events = append(events, e); mu.Unlock() }
	}
	trace := &httptrace.ClientTrace{
		WroteHeaders: note("headers"),
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err != nil {
				t.Errorf("WroteRequest: %v", info.Err)
			}
			if !rec.closed.Load() {
				t.Error("WroteRequest before the body was closed")
			}
			note("request")()
		},
	}
	if n := postCounted(t, c, wc, s.url("/"), rb, data, trace); n != 1 {
		t.Errorf("in-memory body: %d socket writes, want 1 (HEADERS and DATA together)", n)
	}
	if !rec.closed.Load() {
		t.Error("request body not closed")
	}
	if got := strings.Join(events, ","); got != "headers,request" {
		t.Errorf("trace events %q, want headers,request", got)
	}

	// The same bytes, not marked as held in memory, go out apart: the
	// body writer sends them after the HEADERS.
	plain := &closeRecorder{Reader: bytes.NewReader(data)}
	if n := postCounted(t, c, wc, s.url("/"), plain, data, nil); n != 2 {
		t.Errorf("body not known in memory: %d socket writes, want 2", n)
	}
}

func TestInMemoryBodyBeyondOneFrameOrWindowStreams(t *testing.T) {
	t.Run("larger than a frame", func(t *testing.T) {
		s := echoLengthServer(t, nil)
		c, wc := countedConn(t, s)
		data := []byte(strings.Repeat("L", maxInlineBody+1))
		rb, rec := inMemoryBody(data)
		if n := postCounted(t, c, wc, s.url("/"), rb, data, nil); n < 2 {
			t.Errorf("%d-byte body: %d socket writes, want the HEADERS apart", len(data), n)
		}
		// The body writer closes it after its last write, maybe after
		// the response arrived.
		waitFor(t, "the body writer to close the body", rec.closed.Load)
	})
	t.Run("larger than the stream window", func(t *testing.T) {
		// The server's streams take 1,000 bytes until it reads them: a
		// 5,000-byte body cannot go out whole with the HEADERS.
		s := echoLengthServer(t, &http.HTTP2Config{MaxReceiveBufferPerStream: 1000})
		c, wc := countedConn(t, s)
		data := []byte(strings.Repeat("W", 5000))
		rb, rec := inMemoryBody(data)
		if n := postCounted(t, c, wc, s.url("/"), rb, data, nil); n < 2 {
			t.Errorf("body beyond the window: %d socket writes, want the HEADERS apart", n)
		}
		waitFor(t, "the body writer to close the body", rec.closed.Load)
	})
}

func TestInMemoryBodyThatChangedFailsWithNothingSent(t *testing.T) {
	s := echoLengthServer(t, nil)
	c, wc := countedConn(t, s)
	// Marked as holding 100 bytes, it holds 60: the request fails before
	// anything of it is written, and the connection stays usable.
	rb, rec := inMemoryBody(bytes.Repeat([]byte("c"), 60))
	req := newRequest(t, "POST", s.url("/"), nil)
	req.Body, req.ContentLength = rb, 100
	before := wc.writes.Load()
	if _, err := c.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "in-memory request body changed") {
		t.Fatalf("RoundTrip error %v, want the body's change", err)
	}
	if n := wc.writes.Load() - before; n != 0 {
		t.Errorf("%d socket writes for a request that failed before sending, want 0", n)
	}
	if !rec.closed.Load() {
		t.Error("request body not closed")
	}
	data := []byte("after")
	rb2, _ := inMemoryBody(data)
	postCounted(t, c, wc, s.url("/"), rb2, data, nil)
	if !streamsSettled(c) {
		t.Error("streams left open")
	}
}
