package transport

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// TestH2InMemoryBodySentWithHeaders pins which request bodies go out with
// their HEADERS in one socket write over HTTP/2: a small body made by
// http.NewRequest from a strings or bytes reader (it has GetBody and holds
// exactly ContentLength bytes); not one without GetBody, and not one whose
// ContentLength says otherwise, which fails with net/http's error.
func TestH2InMemoryBodySentWithHeaders(t *testing.T) {
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
		}
		w.Write(b)
	}))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hs.Config.Protocols = &p
	hs.Start()
	defer hs.Close()

	var writes atomic.Int32 // writeCountingConn (chunkedwrites_test.go)
	tr := h2cTransport()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCountingConn{Conn: c, writes: &writes}, nil
	}
	defer tr.CloseIdleConnections()
	h2GetOK(t, tr, hs.URL, "HTTP/2.0") // the connection and its SETTINGS

	post := func(req *http.Request, want string) int32 {
		t.Helper()
		before := writes.Load()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want || resp.ProtoMajor != 2 {
			t.Fatalf("%s: server read %q, want %q", resp.Proto, b, want)
		}
		return writes.Load() - before
	}
	if n := post(newReq(t, "POST", hs.URL, strings.NewReader("hello")), "hello"); n != 1 {
		t.Errorf("NewRequest body: %d socket writes, want 1", n)
	}
	noGetBody := newReq(t, "POST", hs.URL, strings.NewReader("hello"))
	noGetBody.GetBody = nil
	if n := post(noGetBody, "hello"); n != 2 {
		t.Errorf("body without GetBody: %d socket writes, want 2 (HEADERS, then the body)", n)
	}

	// ContentLength below the body's length: net/http's error, from the
	// body writer, not the inline write.
	short := func() *http.Request {
		req := newReq(t, "POST", hs.URL, strings.NewReader("hello"))
		req.ContentLength = 3
		return req
	}
	_, ferryErr := tr.RoundTrip(short())
	var np http.Protocols
	np.SetUnencryptedHTTP2(true)
	nt := &http.Transport{Protocols: &np}
	defer nt.CloseIdleConnections()
	_, netErr := nt.RoundTrip(short())
	if ferryErr == nil || netErr == nil || ferryErr.Error() != netErr.Error() {
		t.Errorf("ContentLength 3 for 5 bytes: ferry %v, net/http %v", ferryErr, netErr)
	}
}

// TestH2InMemoryBodyReplayedAfterRefusedStream: a body sent with its
// HEADERS has been read when the server refuses the stream, so the retry
// sends a fresh copy from GetBody, whole, on the next stream.
func TestH2InMemoryBodyReplayedAfterRefusedStream(t *testing.T) {
	var mu sync.Mutex             // guards bodies
	bodies := map[uint32]string{} // stream ID: DATA received, "|end" once ended
	s := testpeer.StartH2(t, testpeer.H2Script{
		OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
			if conn == 0 && stream == 0 {
				return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
			}
			return testpeer.H2OK(fr, id)
		},
		OnData: func(_ int, _ *http2.Framer, id uint32, data []byte, end bool) error {
			mu.Lock()
			defer mu.Unlock()
			bodies[id] += string(data)
			if end {
				bodies[id] += "|end"
			}
			return nil
		},
	})
	tr := h2cTransport()
	defer tr.CloseIdleConnections()
	req := newReq(t, "POST", "http://"+s.Addr()+"/", strings.NewReader("payload"))
	getBody := req.GetBody
	var copies atomic.Int32
	req.GetBody = func() (io.ReadCloser, error) { copies.Add(1); return getBody() }
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q, want ok", b)
	}
	if n := copies.Load(); n != 1 {
		t.Errorf("GetBody called %d times, want 1 (for the retry)", n)
	}
	got := func() string {
		mu.Lock()
		defer mu.Unlock()
		return bodies[1] + " " + bodies[3]
	}
	// The server answered at the HEADERS; it reads the DATA after them.
	eventually(t, "both streams' bodies at the server", func() bool { return got() == "payload|end payload|end" })
}
