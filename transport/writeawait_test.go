//go:build linux

package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/benchchild"
	"github.com/ferryhttp/ferry/internal/proccost"
)

// TestWriteAwaitSyscalls: a GET, or a POST with a small body in memory, on
// a reused cleartext connection costs two read/write system calls (the
// request's write, the response's read), not three (writeawait_unix.go);
// with a trace hook it takes the usual path, whose first read finds nothing
// yet. The server runs in a child process, so that only the client's
// system calls are counted (/proc/self/io), and answers 1 ms late, so that
// the usual path's extra read is certain.
func TestWriteAwaitSyscalls(t *testing.T) {
	addr, stop, err := benchchild.Start(slowServerEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	url := "http://" + addr + "/bench"
	buf := make([]byte, 512)
	payload := strings.Repeat("p", 100)
	do := func(tr *Transport, ctx context.Context, method string) {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(payload)
		}
		req, _ := http.NewRequestWithContext(ctx, method, url, body)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.ReadFull(resp.Body, buf[:benchBodyLen])
		resp.Body.Close()
		if err != nil || n != benchBodyLen || resp.StatusCode != 200 {
			t.Fatalf("status %d, %d body bytes, %v", resp.StatusCode, n, err)
		}
	}
	const requests = 200
	perRequest := func(tr *Transport, ctx context.Context, method string) float64 {
		do(tr, ctx, method) // the connection is dialled outside the count
		before := proccost.Read()
		for range requests {
			do(tr, ctx, method)
		}
		_, _, rw := proccost.Since(before).PerOp(requests)
		return rw
	}
	traced := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {}})
	plain := &Transport{}
	defer plain.CloseIdleConnections()
	timed := &Transport{ResponseHeaderTimeout: time.Minute}
	defer timed.CloseIdleConnections()
	for _, method := range []string{"GET", "POST"} {
		// Two per request, plus a rare extra read after a spurious wake-up.
		if rw := perRequest(plain, context.Background(), method); rw > 2.2 {
			t.Errorf("%s: %.2f read/write system calls per request, want 2 (at most 2.2)", method, rw)
		}
		if rw := perRequest(timed, context.Background(), method); rw > 2.2 {
			t.Errorf("%s with ResponseHeaderTimeout: %.2f per request, want 2 (at most 2.2)", method, rw)
		}
		// Three per request, unless the client is held up for over 1 ms
		// between its write and its read.
		if rw := perRequest(plain, traced, method); rw < 2.5 {
			t.Errorf("%s with a trace hook (usual path): %.2f per request, want about 3", method, rw)
		}
	}
}

// TestWriteAwaitHeaderTimeout: ResponseHeaderTimeout ends a wait inside
// writeAwait with net/http's header timeout error, for a server that reads
// the request and never answers.
func TestWriteAwaitHeaderTimeout(t *testing.T) {
	srv := startRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		<-c.s.close // never answer
	})
	tr := &Transport{ResponseHeaderTimeout: 50 * time.Millisecond}
	defer tr.CloseIdleConnections()
	_, err := tr.RoundTrip(newReq(t, "GET", srv.URL, nil))
	if err == nil || err.Error() != "net/http: timeout awaiting response headers" {
		t.Fatalf("err = %v, want net/http's header timeout", err)
	}
}

// TestWriteAwaitCancelWhileWaiting: a request whose server never answers
// is waiting inside writeAwait; cancelling its context ends it with the
// context's error and closes the connection, as on the usual path.
func TestWriteAwaitCancelWhileWaiting(t *testing.T) {
	got := make(chan struct{})
	srv := startRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		close(got)
		<-c.s.close // never answer
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-got
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled request still waiting")
	}
	if st := tr.Stats(); st.Conns.OpenH1 != 0 {
		t.Fatalf("%d HTTP/1.1 connections open after the cancelled request", st.Conns.OpenH1)
	}
}

// TestWriteAwaitLargeHead: a request head larger than the write buffer
// (a 4 MiB header) goes out through the buffer's own writes and, for its
// last part, writeAwait; the server gets all of it and the response
// arrives.
func TestWriteAwaitLargeHead(t *testing.T) {
	big := strings.Repeat("v", 4<<20)
	srv := startRawServer(t, func(c *rawConn) {
		head, err := c.readRequest()
		if err != nil {
			return
		}
		c.s.mu.Lock()
		h := c.s.seen[len(c.s.seen)-1].Header.Get("X-Big")
		c.s.mu.Unlock()
		if head != "GET /" || h != big {
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	req := newReq(t, "GET", srv.URL, nil)
	req.Header.Set("X-Big", big)
	if o := observe(tr, req); o.Status != 200 || o.Body != "ok" {
		t.Fatalf("got %+v", o)
	}
}

// TestWriteAwaitFullSocket: when the socket cannot take the request
// (its send buffer is full), writeAwait leaves it to net.Conn.Write, whose
// deadline and error it reports: nothing is lost or reordered, and once
// the peer reads, the rest goes out.
func TestWriteAwaitFullSocket(t *testing.T) {
	// Fixed small buffers (no autotuning), so that the socket stays full
	// while the peer does not read.
	small := func(opt int) func(network, address string, c syscall.RawConn) error {
		return func(network, address string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) })
			return errors.Join(err, serr)
		}
	}
	ln, err := (&net.ListenConfig{Control: small(syscall.SO_RCVBUF)}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := (&net.Dialer{Control: small(syscall.SO_SNDBUF)}).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	tr := &Transport{}
	tr.init()
	pc := newH1Conn(tr, connKey{scheme: "http", addr: ln.Addr().String()}, conn)
	defer conn.Close()
	if pc.raw == nil {
		t.Fatal("no RawConn for a *net.TCPConn")
	}
	// Fill the socket until not one more byte fits (a blocking Write would
	// stop earlier: it waits for a third of the buffer to be free).
	var sent bytes.Buffer
	chunk := bytes.Repeat([]byte("f"), 64<<10)
	for _, size := range []int{len(chunk), 1} {
		for {
			var n int
			var werr error
			pc.raw.Write(func(fd uintptr) bool {
				n, werr = syscall.Write(int(fd), chunk[:size])
				return true
			})
			if n > 0 {
				sent.Write(chunk[:n])
			}
			if werr == syscall.EAGAIN {
				break
			}
			if werr != nil {
				t.Fatal(werr)
			}
		}
	}
	// The request cannot go out now: writeAwait hands it to conn.Write,
	// whose (new) deadline ends it.
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	conn.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := pc.writeAwait(req)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || n == len(req) {
		t.Fatalf("writeAwait on a full socket = %d, %v; want a short write and conn.Write's timeout", n, err)
	}
	sent.Write(req[:n])
	// The peer reads, then answers; the rest of the request goes out after
	// what was sent, and writeAwait returns once the answer is readable.
	conn.SetWriteDeadline(time.Time{})
	want := append(append([]byte{}, sent.Bytes()...), req[n:]...)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		io.ReadFull(peer, b)
		got <- b
		peer.Write([]byte("!"))
	}()
	m, err := pc.writeAwait(req[n:])
	if err != nil || m != len(req)-n {
		t.Fatalf("writeAwait of the rest = %d, %v", m, err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatal("the peer did not get the bytes in the order written")
	}
	var answer [1]byte
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(conn, answer[:]); err != nil || answer[0] != '!' {
		t.Fatalf("answer %q, %v", answer, err)
	}
}
