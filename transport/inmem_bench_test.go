package transport

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRoundTripInMemory is the client's own work per request, without
// system calls or a server: the connection is an in-memory net.Conn that
// answers every request with a response head like the child server's of
// BenchmarkRoundTrip. It stands in for a socket ferry reaches; the
// ferry-hidden rows put it behind a wrapper that hides it, as a custom
// DialContext may, which ferry reads with a goroutine while it is idle
// (idlewatch.go). The URL names no port, as most URLs do. Rows:
// transport/method, a GET without a body and a POST with the small body
// http.NewRequest makes of a strings.Reader. It isolates
// the parsing, framing and bookkeeping code, and a CPU profile of it shows
// that code without the syscalls that make up most of a real request's
// profile. It leaves out exactly those costs (syscalls, poller,
// scheduling), so it does not replace the real-socket benchmarks. On these
// VMs its time still moves by a fifth between runs (the host's load comes
// in phases): compare two builds by alternating them, many rounds, pinned
// to one CPU.
func BenchmarkRoundTripInMemory(b *testing.B) {
	const response = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n" +
		"Server: bench\r\nX-Request-Id: 1\r\n\r\nhello"
	for _, c := range []struct {
		name string
		rt   func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper
	}{
		{"ferry", func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper {
			t := New()
			t.DialContext = dial
			return t
		}},
		{"ferry-hidden", func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper {
			t := New()
			t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				return hiddenConn{c}, err
			}
			return t
		}},
		{"nethttp", func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.DialContext = dial
			return t
		}},
	} {
		for _, method := range []string{"GET", "POST"} {
			b.Run(c.name+"/"+method, func(b *testing.B) {
				benchInMemory(b, c.rt, response, method, c.name == "ferry-hidden")
			})
		}
	}
}

// benchInMemory runs one row of BenchmarkRoundTripInMemory: a GET without
// a body, or a POST with the body http.NewRequest makes of a
// *strings.Reader (ContentLength and GetBody set), rewound before each
// request so the loop allocates nothing of its own.
func benchInMemory(b *testing.B, newRT func(dial func(context.Context, string, string) (net.Conn, error)) http.RoundTripper, response, method string, wakeable bool) {
	var conns []*answeringConn
	rt := newRT(func(context.Context, string, string) (net.Conn, error) {
		ac := newAnsweringConn(response)
		if wakeable {
			ac = newWakeableConn(response)
		}
		conns = append(conns, ac)
		return ac, nil
	})
	defer func() {
		if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
	}()
	const payload = "name=ferry&kind=bench" // no blank line in it (answeringConn)
	var body io.Reader
	sr := strings.NewReader(payload)
	if method == "POST" {
		body = sr
	}
	req, err := http.NewRequest(method, "http://bench.invalid/bench", body)
	if err != nil {
		b.Fatal(err)
	}
	if method == "POST" && (req.GetBody == nil || req.ContentLength != int64(len(payload))) {
		b.Fatal("NewRequest set no GetBody or ContentLength")
	}
	buf := make([]byte, 16)
	b.ReportAllocs()
	for b.Loop() {
		sr.Reset(payload)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.ReadFull(resp.Body, buf[:5])
		if err != nil || n != 5 || resp.StatusCode != 200 || resp.Header["X-Request-Id"][0] != "1" {
			b.Fatalf("bad response: %d %q %v", resp.StatusCode, buf[:n], err)
		}
		if n, err := resp.Body.Read(buf); n != 0 || err != io.EOF {
			b.Fatalf("body did not end: %d %v", n, err)
		}
		resp.Body.Close()
		if method == "POST" && sr.Len() != 0 {
			b.Fatalf("%d body bytes not sent", sr.Len())
		}
	}
	b.StopTimer()
	if len(conns) != 1 {
		b.Fatalf("%d connections dialled, want 1", len(conns))
	}
}

// answeringConn is an in-memory connection that answers each request head
// written to it with a canned response, whether a body follows in the
// same write or not. Reads block until a request has
// been written (net/http reads from another goroutine).
type answeringConn struct {
	response string
	pending  chan struct{} // one token per request written and not yet answered
	unread   string        // what is left of the current answer
	closed   chan struct{}
	// expired: a read deadline in the past is set; a Read with no answer
	// due fails at once instead of blocking. With expire (made by
	// newWakeableConn, for reads that block while the deadline is set) a
	// blocked Read is woken too: one token, taken back when the deadline
	// is cleared. Without it the benchmark's rows pay nothing for that.
	expired atomic.Bool
	expire  chan struct{}
}

// StandsInForSocket (h1conn.SocketStandIn): in the benchmark the connection stands in for a socket
// ferry reaches, which it does not watch while idle (idlewatch.go); the
// ferry-hidden rows hide it behind a wrapper to measure that watch.
func (c *answeringConn) StandsInForSocket() {}

// hiddenConn hides what the connection under it implements beyond net.Conn,
// as a DialContext wrapper does.
type hiddenConn struct{ net.Conn }

func newAnsweringConn(response string) *answeringConn {
	return &answeringConn{response: response, pending: make(chan struct{}, 64), closed: make(chan struct{})}
}

// newWakeableConn is an answeringConn whose blocked Read a deadline in the
// past wakes, as a socket's does: ferry's read of an idle connection that
// hides its socket (idlewatch.go) blocks and is stopped that way.
func newWakeableConn(response string) *answeringConn {
	c := newAnsweringConn(response)
	c.expire = make(chan struct{}, 1)
	return c
}

func (c *answeringConn) Write(p []byte) (int, error) {
	// A request's head ends in the write that holds its blank line; a body
	// written with it (or after it) holds none.
	if bytes.Contains(p, []byte("\r\n\r\n")) {
		c.pending <- struct{}{}
	}
	return len(p), nil
}

func (c *answeringConn) Read(p []byte) (int, error) {
	if c.unread == "" && c.expired.Load() {
		select {
		case <-c.pending:
			c.unread = c.response
		default:
			return 0, os.ErrDeadlineExceeded
		}
	}
	if c.unread == "" && c.expire == nil {
		select {
		case <-c.pending:
			c.unread = c.response
		case <-c.closed:
			return 0, io.EOF
		}
	} else if c.unread == "" {
		select {
		case <-c.pending:
			c.unread = c.response
		case <-c.closed:
			return 0, io.EOF
		case <-c.expire:
			return 0, os.ErrDeadlineExceeded
		}
	}
	n := copy(p, c.unread)
	c.unread = c.unread[n:]
	return n, nil
}

func (c *answeringConn) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return nil
}

func (c *answeringConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
}
func (c *answeringConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2}
}
func (c *answeringConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }
func (c *answeringConn) SetReadDeadline(t time.Time) error {
	past := !t.IsZero() && !t.After(time.Now())
	c.expired.Store(past)
	if c.expire == nil {
		return nil
	}
	if past {
		select {
		case c.expire <- struct{}{}:
		default:
		}
	} else {
		select {
		case <-c.expire:
		default:
		}
	}
	return nil
}
func (c *answeringConn) SetWriteDeadline(time.Time) error { return nil }
