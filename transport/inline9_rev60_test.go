package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
)

// Review (rev60) tests of the inline body bound (inlinebound.go).

// inline9LeftoverServer answers the first request on each connection as
// soon as its head is read (one byte at a time, so none of the body is
// consumed), and each later request on it when told through next (the
// client's GotConn for a reused connection), without reading anything: the
// bodies stay in the socket buffers until release is closed, when it reads
// all that is left.
type inline9LeftoverServer struct {
	ln      net.Listener
	release chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex // guards next and conns
	next    map[string]chan struct{}
	conns   []net.Conn
}

const inline9Answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

func startInline9LeftoverServer(t *testing.T) *inline9LeftoverServer {
	t.Helper()
	lc := net.ListenConfig{Control: smallBufferControl}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &inline9LeftoverServer{ln: ln, release: make(chan struct{}), next: map[string]chan struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ch := make(chan struct{}, 64)
			s.mu.Lock()
			s.next[c.RemoteAddr().String()] = ch
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go s.serve(c, ch)
		}
	}()
	return s
}

func (s *inline9LeftoverServer) serve(c net.Conn, next chan struct{}) {
	defer s.wg.Done()
	defer c.Close()
	var last [4]byte
	b := make([]byte, 1)
	for string(last[:]) != "\r\n\r\n" {
		if _, err := c.Read(b); err != nil {
			return
		}
		copy(last[:], last[1:])
		last[3] = b[0]
	}
	if _, err := io.WriteString(c, inline9Answer); err != nil {
		return
	}
	for {
		select {
		case <-next:
			if _, err := io.WriteString(c, inline9Answer); err != nil {
				return
			}
		case <-s.release:
			io.Copy(io.Discard, c)
			return
		}
	}
}

// answerNext tells the server goroutine of the connection whose client
// end is local to answer one more request.
func (s *inline9LeftoverServer) answerNext(local net.Addr) {
	s.mu.Lock()
	ch := s.next[local.String()]
	s.mu.Unlock()
	if ch != nil {
		ch <- struct{}{}
	}
}

func (s *inline9LeftoverServer) close() {
	s.ln.Close()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// TestInline9Rev60LeftoverSendQueue: the bound assumes an idle
// connection's send buffer is empty, but an early answer lets a kept
// connection carry the unread body of its previous request. Over small
// buffers (client SO_SNDBUF 8 KiB as reported, bound 4 KiB), several POSTs
// each just under the bound (so each alone is written inline) go one after
// the other to a server that answers each without reading any body and
// reads everything only after the client has all answers. net/http writes
// the bodies on its write goroutine, drops a connection whose write did
// not end within 50 ms of the answer, and returns every answer; ferry
// wrote each body inline on the caller's goroutine, so once the bodies
// left in the send queue and the server's receive buffer added up to more
// than the socket takes, RoundTrip blocked until the server read.
func TestInline9Rev60LeftoverSendQueue(t *testing.T) {
	t.Skip("rev60: inline bound ignores bytes of an earlier request still in the send queue (kept connection after an early answer): RoundTrip blocks where net/http returns")
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			got := inline9LeftoverRun(t, impl)
			if got != "" {
				t.Errorf("%s: %s", impl, got)
			}
		})
	}
}

func inline9LeftoverRun(t *testing.T, impl string) string {
	s := startInline9LeftoverServer(t)
	defer s.close()
	sndbuf := make(chan int, 1)
	d := inline9Dialer(true, sndbuf)
	var rt http.RoundTripper = &http.Transport{DialContext: d.DialContext}
	if impl == "ferry" {
		rt = &Transport{DialContext: d.DialContext}
	}
	defer closeIdle(rt)
	const requests = 8
	size := 0
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if info.Reused {
			s.answerNext(info.Conn.LocalAddr())
		}
	}}
	for i := range requests {
		if size == 0 {
			size = 2048 // first request: sndbuf is not known yet
		}
		req, err := http.NewRequest("POST", "http://"+s.ln.Addr().String()+"/", bytes.NewReader(patterned(size)))
		if err != nil {
			t.Fatal(err)
		}
		req = req.WithContext(httptrace.WithClientTrace(context.Background(), trace))
		resp, hung, err := roundTripGuarded(rt, req, func() { close(s.release) })
		if hung {
			return fmt.Sprintf("request %d (%d bytes): RoundTrip blocked until the server read the bodies", i, size)
		}
		if err != nil {
			return fmt.Sprintf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			return fmt.Sprintf("request %d: status %d body %q", i, resp.StatusCode, b)
		}
		select {
		case v := <-sndbuf:
			if size == 2048 {
				size = v/2 - 256 // head and body just under the bound
			}
		default:
		}
	}
	return ""
}
