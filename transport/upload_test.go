package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// keepReadingBody is a request body whose Close does not stop its Read (as
// io.NopCloser around a large reader): it yields chunks of zeros, counts
// the Reads that begin after after is closed, and ends with EOF once it has
// yielded tail bytes from then on.
type keepReadingBody struct {
	after      chan struct{}
	tail       int64
	readsAfter atomic.Int32
	sentAfter  atomic.Int64
}

func (b *keepReadingBody) Read(p []byte) (int, error) {
	p = p[:min(len(p), 16<<10)]
	select {
	case <-b.after:
		b.readsAfter.Add(1)
		if b.sentAfter.Load() >= b.tail {
			return 0, io.EOF
		}
		b.sentAfter.Add(int64(len(p)))
	default:
	}
	clear(p)
	return len(p), nil
}

func (b *keepReadingBody) Close() error { return nil }

// TestUploadStopsOnResponseClose: a server that answers at once and
// then reads a streamed upload sees the upload cut (a reset stream, not
// EOF) when the caller closes the response body early, and the caller's
// body is not read once that Close has returned (at most the Read already
// under way), also when the body's own Close does not stop its Read: as
// net/http's HTTP/2 client does (the stream is aborted, the body writer
// stops after its current Read). Over HTTP/3, closing the response body
// closed the request body (c839cae), but quic-go went on reading such a
// body and uploading it to its end.
func TestUploadStopsOnResponseClose(t *testing.T) {
	rows := []struct{ name, impl, proto string }{
		{"nethttp/h2", "nethttp", "h2"},
		{"ferry/h2", "ferry", "h2"},
		{"ferry/h3", "ferry", "h3"},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			uploadEnd := make(chan error, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/warm" {
					return
				}
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				_, err := io.Copy(io.Discard, r.Body)
				uploadEnd <- err
			})
			var rt http.RoundTripper
			var u string
			if tc.proto == "h3" {
				rt, u = h3Closer(t, tc.impl, h)
			} else {
				rt, u = h2TLSClient(t, tc.impl), startTLSProto(t, h, true)+"/"
			}
			body := &keepReadingBody{after: make(chan struct{}), tail: 4 << 20}
			req, err := http.NewRequestWithContext(context.Background(), "POST", u, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = -1
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Proto != map[string]string{"h2": "HTTP/2.0", "h3": "HTTP/3.0"}[tc.proto] {
				t.Fatalf("answered over %s", resp.Proto)
			}
			resp.Body.Close()
			close(body.after)
			select {
			case err := <-uploadEnd:
				if err == nil {
					t.Errorf("server read the upload to its end (%d bytes after the response body was closed); want it cut", body.sentAfter.Load())
				} else {
					t.Logf("upload cut: %v", err)
				}
			case <-time.After(20 * time.Second): // hang guard
				t.Fatal("the server's read of the upload never ended")
			}
			closeIdle(rt)
			if n := body.readsAfter.Load(); n > 1 {
				t.Errorf("request body read %d times after the response body's Close returned, want at most once (the Read under way)", n)
			}
		})
	}
}

// releasedBody yields "hello", then blocks until release is closed (then
// yields " world" and EOF) or until it is closed (then fails).
type releasedBody struct {
	release, closed chan struct{}
	once            sync.Once
	step            int // only the uploading goroutine reads
}

func newReleasedBody() *releasedBody {
	return &releasedBody{release: make(chan struct{}), closed: make(chan struct{})}
}

func (b *releasedBody) Read(p []byte) (int, error) {
	b.step++
	switch b.step {
	case 1:
		return copy(p, "hello"), nil
	case 2:
		select {
		case <-b.release:
			return copy(p, " world"), nil
		case <-b.closed:
			return 0, errors.New("test: read on closed body")
		}
	}
	return 0, io.EOF
}

func (b *releasedBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestUploadGoesOnAfterResponseEOF: over HTTP/3, a server that sends
// its whole response (FIN) and then reads the rest of a streamed upload
// gets all of it when the caller reads the response to its end and only
// then lets the upload finish, the response body not yet closed: the end
// of the response is not the end of the exchange (only closing the
// response body closes the request body), as with quic-go's own client.
func TestUploadGoesOnAfterResponseEOF(t *testing.T) {
	for _, impl := range []string{"quicgo", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			type upload struct {
				data string
				err  error
			}
			got := make(chan upload, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/warm" {
					return
				}
				w.WriteHeader(200)
				str, err := w.(http3.HTTPStreamer).HTTPStream()
				if err != nil {
					got <- upload{err: err}
					return
				}
				str.Write([]byte("early"))
				str.Close() // the response ends here
				b, err := io.ReadAll(str)
				got <- upload{string(b), err}
			})
			rt, u := h3Closer(t, impl, h)
			body := newReleasedBody()
			req, err := http.NewRequest("POST", u, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = -1
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "early" {
				t.Fatalf("response %q, %v; want \"early\" and EOF", b, err)
			}
			close(body.release)
			select {
			case up := <-got:
				if up.err != nil || up.data != "hello world" {
					t.Errorf("server read %q, %v; want \"hello world\" and EOF", up.data, up.err)
				}
			case <-time.After(20 * time.Second): // hang guard
				t.Fatal("the server's read of the upload never ended")
			}
		})
	}
}
