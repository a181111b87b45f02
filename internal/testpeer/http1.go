package testpeer

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
)

// ChunkedResponse is an HTTP/1.1 200 response whose body of total bytes
// ('c') comes in chunks of at most chunk bytes, with a trailer "X-T: v"
// announced in the head when trailer.
func ChunkedResponse(total, chunk int, trailer bool) string {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n")
	if trailer {
		b.WriteString("Trailer: X-T\r\n")
	}
	b.WriteString("\r\n")
	for total > 0 {
		n := min(chunk, total)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, strings.Repeat("c", n))
		total -= n
	}
	b.WriteString("0\r\n")
	if trailer {
		b.WriteString("X-T: v\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

// RawServer is a scripted TCP server on loopback, for tests that decide
// every byte a client reads (HTTP/1.1 heads a real server would not send,
// answers at a chosen moment).
type RawServer struct {
	ln net.Listener
	wg sync.WaitGroup

	conns connSet
}

// StartRaw runs script on each connection a new loopback server accepts
// (ServeRaw).
func StartRaw(t testing.TB, script func(n int, c net.Conn)) *RawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ServeRaw(t, ln, script)
}

// ServeRaw runs script on each connection ln accepts (a listener the
// caller made: IPv6, small socket buffers, TLS), n being its position in
// accept order; the connection is closed when script returns. The test's
// cleanup closes the listener and every live connection and waits for the
// scripts.
func ServeRaw(t testing.TB, ln net.Listener, script func(n int, c net.Conn)) *RawServer {
	s := &RawServer{ln: ln}
	s.wg.Add(1)
	go serveEach(ln, &s.wg, &s.conns, script)
	t.Cleanup(func() {
		s.Abort()
		s.wg.Wait()
	})
	return s
}

// Live is the number of connections open: accepted, their script not
// returned.
func (s *RawServer) Live() int {
	open, _ := s.conns.counts()
	return open
}

// Abort closes the listener and every live connection, so that a client
// blocked on the server gets an error instead of waiting forever.
func (s *RawServer) Abort() {
	s.ln.Close()
	s.conns.closeAll()
}

// Addr is the server's host:port.
func (s *RawServer) Addr() string { return s.ln.Addr().String() }
