package transport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// smallBufferControl sets a socket's send and receive buffers to 4 KiB
// (the kernel doubles it), as on a path with small windows.
func smallBufferControl(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096); serr == nil {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// TestInlineBodyEarlyAnswerSmallBuffers: a 64 KiB body in memory
// (GetBody set) to a server that answers on the head and reads the body
// only once the client has the answer (it is told out of band), over
// sockets with small buffers. net/http writes the body on its write
// goroutine and returns the response; ferry writes a body up to
// syncBodyLimit inline before reading the response only when the
// connection's socket send buffer certainly takes it (inlinebound.go), so
// here (an 8 KiB send buffer) the body goes to the body writer and the
// response comes back. Without that bound the inline write blocked and
// RoundTrip never returned.
func TestInlineBodyEarlyAnswerSmallBuffers(t *testing.T) {
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			const size = 64 << 10
			got := inlineSmallBufferRun(t, impl, size, true)
			if want := fmt.Sprintf("status 200; server read %d bytes", size); got != want {
				t.Errorf("%s: %s, want %s", impl, got, want)
			}
		})
	}
}

// TestAsyncBodyEarlyAnswerSmallBuffers: bodies in memory that are
// not written inline (above the 64 KiB bound, or without GetBody) go to
// the body writer, so over small socket buffers a server that answers on
// the head and reads the body only once the client has the answer gets
// it, from both transports. Raising the bound (to 1 MiB) or writing a
// body without GetBody inline passed every other test.
func TestAsyncBodyEarlyAnswerSmallBuffers(t *testing.T) {
	for _, row := range []struct {
		size    int
		getBody bool
	}{
		{64<<10 + 1, true},
		{1 << 20, true},
		{32 << 10, false},
	} {
		for _, impl := range []string{"nethttp", "ferry"} {
			t.Run(fmt.Sprintf("%d/getBody=%v/%s", row.size, row.getBody, impl), func(t *testing.T) {
				got := inlineSmallBufferRun(t, impl, row.size, row.getBody)
				if want := fmt.Sprintf("status 200; server read %d bytes", row.size); got != want {
					t.Errorf("%s: %s, want %s", impl, got, want)
				}
			})
		}
	}
}

// inlineSmallBufferRun sends a POST of size zero bytes in memory
// (bytes.Reader: GetBody and ContentLength set) through impl over sockets
// with small buffers to a server that answers on the head and reads the
// body only after RoundTrip returned, and says what happened. Without
// getBody the request's GetBody is cleared.
func inlineSmallBufferRun(t *testing.T, impl string, size int, getBody bool) string {
	lc := net.ListenConfig{Control: smallBufferControl}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	release := make(chan struct{})
	bodyLen := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			bodyLen <- err.Error()
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			bodyLen <- err.Error()
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		<-release
		n, err := io.Copy(io.Discard, req.Body)
		bodyLen <- fmt.Sprintf("server read %d bytes%s", n, errSuffix(err))
	}()
	d := &net.Dialer{Control: smallBufferControl}
	var rt http.RoundTripper = &http.Transport{DialContext: d.DialContext}
	if impl == "ferry" {
		rt = &Transport{DialContext: d.DialContext}
	}
	defer closeIdle(rt)
	req, err := http.NewRequest("POST", "http://"+ln.Addr().String()+"/", bytes.NewReader(make([]byte, size)))
	if err != nil {
		t.Fatal(err)
	}
	if !getBody {
		req.GetBody = nil
	}
	resp, hung, err := roundTripGuarded(rt, req, func() { close(release) })
	if hung {
		<-bodyLen
		return "RoundTrip blocked writing the body until the server read it"
	}
	close(release)
	if err != nil {
		<-bodyLen
		return "error: " + err.Error()
	}
	// The server's count before the response's end: a body writer still
	// busy when the response ends gets maxWriteWait (50 ms, as in
	// net/http) before the connection is given up, which a loaded machine
	// can overrun with a 1 MiB body through these buffers.
	var read string
	select {
	case read = <-bodyLen:
	case <-time.After(20 * time.Second): // hang guard only
		read = "the server did not finish reading the body"
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	return fmt.Sprintf("status %d; %s", resp.StatusCode, read)
}

// errSuffix is err in parentheses after a space, or nothing for nil.
func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}
