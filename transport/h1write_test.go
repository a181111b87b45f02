package transport

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The streaming request body: a body not known to be in
// memory gets its head sent before its first byte is read, and a body known
// to be in memory goes out with its head in the same write, as net/http
// sends both.

// TestH1HeadBeforeFirstBodyByte: a streaming body whose first byte
// comes only after the server answered the head still gets that answer
// (net/http flushes the head first; without it the head waits in the
// buffer for a body byte that waits for the answer).
func TestH1HeadBeforeFirstBodyByte(t *testing.T) {
	for _, declared := range []int64{-1, 4} {
		for _, impl := range []string{"nethttp", "ferry"} {
			t.Run(impl+"/"+h1Framing(declared), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.NewResponseController(w).EnableFullDuplex()
					w.WriteHeader(200)
					w.(http.Flusher).Flush()
					io.Copy(w, r.Body)
				}))
				defer srv.Close()
				rt := settings{}.nethttp(nil)
				if impl == "ferry" {
					rt = settings{}.ferry(nil)
				}
				defer closeIdle(rt)
				pr, pw := io.Pipe()
				defer pw.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // hang guard
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, pr)
				req.ContentLength = declared
				resp, err := rt.RoundTrip(req)
				if err != nil {
					pw.Close()
					t.Fatalf("no answer to the head: %v", err)
				}
				defer resp.Body.Close()
				go func() { pw.Write([]byte("ping")); pw.Close() }()
				echo, err := io.ReadAll(resp.Body)
				if string(echo) != "ping" || err != nil {
					t.Errorf("echo %q %v", echo, err)
				}
			})
		}
	}
}

// firstWriteConn records the first write made on a connection.
type firstWriteConn struct {
	net.Conn
	mu    *sync.Mutex // guards first
	first *[]byte
}

func (c firstWriteConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if *c.first == nil {
		*c.first = append([]byte{}, p...)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// TestH1InMemoryBodyWithHead: whether the first write on the
// connection carries body bytes after the head, for ferry and net/http:
// yes for the readers net/http knows to be in memory (small, or over
// ferry's inline limit), no for any other body.
func TestH1InMemoryBodyWithHead(t *testing.T) {
	big := strings.Repeat("b", 100<<10) // over syncBodyLimit: the asynchronous writer
	bodies := []struct {
		name string
		body func() io.Reader
		size int
	}{
		{"strings.Reader/small", func() io.Reader { return strings.NewReader("small") }, 5},
		{"strings.Reader/large", func() io.Reader { return strings.NewReader(big) }, len(big)},
		{"bytes.Reader/large", func() io.Reader { return bytes.NewReader([]byte(big)) }, len(big)},
		{"bytes.Buffer/large", func() io.Reader { return bytes.NewBufferString(big) }, len(big)},
		{"other/large", func() io.Reader { return onlyReader{strings.NewReader(big)} }, len(big)},
	}
	for _, b := range bodies {
		var got [2]bool
		for i, impl := range []string{"nethttp", "ferry"} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, _ := io.Copy(io.Discard, r.Body)
				if int(n) != b.size {
					w.WriteHeader(400)
				}
			}))
			var mu sync.Mutex
			var first []byte
			nt := settings{}.nethttp(nil).(*http.Transport)
			nt.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return firstWriteConn{c, &mu, &first}, nil
			}
			var rt http.RoundTripper = nt
			if impl == "ferry" {
				rt = From(nt)
			}
			req, _ := http.NewRequest("POST", srv.URL, b.body())
			req.ContentLength = int64(b.size)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("%s %s: %v", b.name, impl, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s %s: status %d", b.name, impl, resp.StatusCode)
			}
			closeIdle(rt)
			srv.Close()
			mu.Lock()
			end := bytes.Index(first, []byte("\r\n\r\n"))
			got[i] = end >= 0 && len(first) > end+4
			mu.Unlock()
		}
		if got[0] != got[1] {
			t.Errorf("%s: body with the head in the first write: net/http %v, ferry %v", b.name, got[0], got[1])
		}
	}
}
