package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// Tests of the inline request body bound (inlinebound.go): a body known to
// be in memory is written on the caller's goroutine only when the head and
// body fit in a quarter of the connection's socket send buffer; anything else
// goes to the body writer (asyncbody.go), as every body does in net/http.

// inlineProbe watches one ferry Transport through the package's test
// hooks: the bound each connection derived from its socket (one entry per
// send buffer read) and the body writers started.
type inlineProbe struct {
	mu     sync.Mutex // guards bounds, conns and async
	bounds []int64
	conns  map[*h1conn.Conn]int // send buffer reads per connection
	async  int
}

func newInlineProbe(t *testing.T, tr *Transport) *inlineProbe {
	p := &inlineProbe{conns: map[*h1conn.Conn]int{}}
	tr.h1cfg.InlineBound = func(pc *h1conn.Conn, bound int64) {
		p.mu.Lock()
		p.bounds = append(p.bounds, bound)
		p.conns[pc]++
		p.mu.Unlock()
	}
	tr.h1cfg.BodyWriter = func(*h1conn.Conn) {
		p.mu.Lock()
		p.async++
		p.mu.Unlock()
	}
	return p
}

// asyncWrites returns the number of body writers started so far.
func (p *inlineProbe) asyncWrites() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.async
}

// reads returns the bounds read so far and the reads per connection.
func (p *inlineProbe) reads() ([]int64, []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var per []int
	for _, n := range p.conns {
		per = append(per, n)
	}
	return append([]int64(nil), p.bounds...), per
}

// inlineRequest is what the server saw of one request.
type inlineRequest struct {
	headLen int    // bytes of the head, blank line included
	body    []byte // the body as read
	err     error  // reading the body failed
}

// inlineServer is a loopback HTTP/1.1 server (TLS when cert is set) whose
// sockets may have small buffers. Each request's head length and body go
// to reqs. It answers "200 ok" after reading the body, sending
// "100 Continue" first when the request expects it; with early, it answers
// as soon as the head is read (after a 100 Continue when expected) and
// reads the body only once release is closed.
type inlineServer struct {
	url     string
	reqs    chan inlineRequest
	release chan struct{}
}

func startInlineServer(t *testing.T, small, early bool, cert *selfsigned.Cert) *inlineServer {
	t.Helper()
	var lc net.ListenConfig
	if small {
		lc.Control = smallBufferControl
	}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &inlineServer{url: "http://" + ln.Addr().String(), reqs: make(chan inlineRequest, 16), release: make(chan struct{})}
	if cert != nil {
		s.url = "https://" + ln.Addr().String()
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert.TLS}})
	}
	serveRaw(t, ln, func(c *rawConn) { s.serve(c.Conn, early) })
	return s
}

func (s *inlineServer) serve(c net.Conn, early bool) {
	br := bufio.NewReader(c)
	for {
		headLen, n, expect, err := readInlineHead(br)
		if err != nil {
			return
		}
		if expect {
			if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return
			}
		}
		const answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		if early {
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
			<-s.release
		}
		body := make([]byte, n)
		got, err := io.ReadFull(br, body)
		s.reqs <- inlineRequest{headLen: headLen, body: body[:got], err: err}
		if err != nil {
			return
		}
		if !early {
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

// readInlineHead reads a request head, returning its length, its
// Content-Length and whether it carries Expect.
func readInlineHead(br *bufio.Reader) (headLen, contentLength int, expect bool, err error) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return 0, 0, false, err
		}
		headLen += len(line)
		if line == "\r\n" {
			return headLen, contentLength, expect, nil
		}
		k, v, _ := strings.Cut(line, ":")
		switch strings.ToLower(k) {
		case "content-length":
			contentLength, err = strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, 0, false, err
			}
		case "expect":
			expect = true
		}
	}
}

// inlineDialer dials with a 4 KiB SO_SNDBUF and SO_RCVBUF
// (smallBufferControl) when small, and reports on sndbuf each send buffer
// size the kernel then gives the client socket.
func inlineDialer(small bool, sndbuf chan<- int) *net.Dialer {
	if !small {
		return &net.Dialer{}
	}
	return &net.Dialer{Control: func(network, addr string, rc syscall.RawConn) error {
		if err := smallBufferControl(network, addr, rc); err != nil {
			return err
		}
		var v int
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
		}); err != nil {
			return err
		}
		if gerr != nil {
			return gerr
		}
		select {
		case sndbuf <- v:
		default:
		}
		return nil
	}}
}

// patterned returns n bytes that differ from one position to the next.
func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%23)
	}
	return b
}

// postInline sends a POST of body (bytes.Reader: GetBody and
// ContentLength set) and checks the answer and what the server read.
func postInline(t *testing.T, rt http.RoundTripper, s *inlineServer, body []byte) inlineRequest {
	t.Helper()
	req, err := http.NewRequest("POST", s.url+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, hung, err := roundTripGuarded(rt, req, func() {})
	if hung {
		t.Fatalf("POST of %d bytes: RoundTrip hung", len(body))
	}
	if err != nil {
		t.Fatalf("POST of %d bytes: %v", len(body), err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "ok" {
		t.Fatalf("POST of %d bytes: status %d body %q", len(body), resp.StatusCode, got)
	}
	r := <-s.reqs
	if r.err != nil || !bytes.Equal(r.body, body) {
		t.Fatalf("POST of %d bytes: server read %d bytes (%v), not the body sent", len(body), len(r.body), r.err)
	}
	return r
}

// TestInlineBoundEdges: over a client socket whose send buffer the
// kernel sets to 8 KiB (SO_SNDBUF 4096, doubled), a body whose head and
// body add up to exactly a quarter of it is written inline, one byte more goes
// to the body writer; the bound is read once for the connection that
// carries them all. (Writing every body inline, or none, fails a row.)
func TestInlineBoundEdges(t *testing.T) {
	sndbuf := make(chan int, 1)
	tr := &Transport{DialContext: inlineDialer(true, sndbuf).DialContext}
	defer tr.CloseIdleConnections()
	p := newInlineProbe(t, tr)
	s := startInlineServer(t, false, false, nil)

	// A first body, inline whatever the bound, gives the head length
	// (the same for every body with a four-digit Content-Length).
	probe := postInline(t, tr, s, patterned(1000))
	quarter := int64(<-sndbuf) / 4
	bounds, _ := p.reads()
	if len(bounds) != 1 || bounds[0] != quarter {
		t.Fatalf("bounds read %v, want one of %d (a quarter of the send buffer)", bounds, quarter)
	}
	room := int(quarter) - probe.headLen
	if room < 1000 || room >= 9999 {
		t.Fatalf("room for a body %d: not a four-digit length", room)
	}
	for _, row := range []struct {
		size  int
		async bool
	}{
		{1000, false},
		{room, false},
		{room + 1, true},
		{room - 1, false},
		{2 * room, true},
	} {
		before := p.asyncWrites()
		r := postInline(t, tr, s, patterned(row.size))
		if r.headLen != probe.headLen {
			t.Fatalf("head of %d bytes, want %d", r.headLen, probe.headLen)
		}
		if async := p.asyncWrites() > before; async != row.async {
			t.Errorf("body of %d bytes (head+body %d, bound %d): body writer started %v, want %v",
				row.size, row.size+r.headLen, quarter, async, row.async)
		}
	}
	if bounds, per := p.reads(); len(bounds) != 1 || len(per) != 1 || per[0] != 1 {
		t.Errorf("send buffer reads %v per connection %v, want one on one connection", bounds, per)
	}
}

// TestInlineDefaultBuffers: with the kernel's default loopback
// buffers a 64 KiB body in memory (h1conn.SyncBodyLimit) is still written inline,
// in cleartext and over TLS, where the bound comes from the TCP socket under
// the *tls.Conn. (Not unwrapping TLS sends the TLS row to the body writer.)
func TestInlineDefaultBuffers(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct {
		name string
		cert *selfsigned.Cert
	}{
		{"http", nil},
		{"https", cert},
	} {
		t.Run(row.name, func(t *testing.T) {
			tr := &Transport{}
			if row.cert != nil {
				tr.TLSClientConfig = row.cert.ClientConfig()
			}
			defer tr.CloseIdleConnections()
			p := newInlineProbe(t, tr)
			s := startInlineServer(t, false, false, row.cert)
			for range 3 {
				postInline(t, tr, s, patterned(h1conn.SyncBodyLimit))
			}
			if n := p.asyncWrites(); n != 0 {
				t.Errorf("%d body writers started for 64 KiB bodies, want none", n)
			}
			if bounds, per := p.reads(); len(bounds) != 1 || bounds[0] < h1conn.SyncBodyLimit+1024 || per[0] != 1 {
				t.Errorf("bounds read %v per connection %v, want one above 64 KiB", bounds, per)
			}
		})
	}
}

// TestInlineBodyEarlyAnswer: a server answering on the head (after a
// 100 Continue when the request expects one) and reading the body only once
// the client has the answer, over sockets with small buffers, gets its
// answer back through net/http and ferry alike: over TLS, with
// Expect: 100-continue, and over a connection from a custom DialContext
// whose socket ferry cannot reach (a wrapper: bound 0, every body to the
// writer). Without the bound (every body up to 64 KiB inline, as before)
// each ferry row blocked.
func TestInlineBodyEarlyAnswer(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	type wrapped struct{ net.Conn }
	for _, row := range []struct {
		name   string
		size   int
		tls    bool
		expect bool
		wrap   bool
	}{
		{"https", 64 << 10, true, false, false},
		{"https/16KiB", 16 << 10, true, false, false},
		{"expect", 64 << 10, false, true, false},
		{"https/expect", 32 << 10, true, true, false},
		{"wrapper", 32 << 10, false, false, true},
		{"wrapper/expect", 16 << 10, false, true, true},
	} {
		for _, impl := range []string{"nethttp", "ferry"} {
			t.Run(row.name+"/"+impl, func(t *testing.T) {
				var c *selfsigned.Cert
				if row.tls {
					c = cert
				}
				s := startInlineServer(t, true, true, c)
				sndbuf := make(chan int, 1)
				d := inlineDialer(true, sndbuf)
				dial := d.DialContext
				if row.wrap {
					dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
						conn, err := d.DialContext(ctx, network, addr)
						if err != nil {
							return nil, err
						}
						return wrapped{conn}, nil
					}
				}
				var rt http.RoundTripper
				var p *inlineProbe
				if impl == "ferry" {
					tr := &Transport{DialContext: dial, TLSClientConfig: cert.ClientConfig()}
					p = newInlineProbe(t, tr)
					rt = tr
				} else {
					rt = &http.Transport{DialContext: dial, TLSClientConfig: cert.ClientConfig()}
				}
				defer closeIdle(rt)
				body := patterned(row.size)
				req, err := http.NewRequest("POST", s.url+"/", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if row.expect {
					req.Header.Set("Expect", "100-continue")
				}
				resp, hung, err := roundTripGuarded(rt, req, func() { close(s.release) })
				if hung {
					<-s.reqs
					t.Fatalf("RoundTrip blocked writing the body until the server read it")
				}
				close(s.release)
				if err != nil {
					<-s.reqs
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r := <-s.reqs
				if p == nil && resp.StatusCode == 200 && string(got) == "ok" && errors.Is(r.err, io.ErrUnexpectedEOF) {
					// net/http, having read the whole response, waits 50 ms
					// for its body write to finish and otherwise closes the
					// connection, cutting the upload short. On a busy
					// machine the server (released only now, reading
					// through 4 KiB buffers) can take longer than that.
					t.Logf("net/http closed the connection after %d of %d body bytes: its write outlasted the response", len(r.body), len(body))
					return
				}
				if resp.StatusCode != 200 || string(got) != "ok" || r.err != nil || !bytes.Equal(r.body, body) {
					t.Fatalf("status %d body %q; server read %d of %d bytes (%v)", resp.StatusCode, got, len(r.body), len(body), r.err)
				}
				if p == nil {
					return
				}
				bounds, _ := p.reads()
				if n := p.asyncWrites(); n != 1 || len(bounds) != 1 {
					t.Fatalf("%d body writers, bounds %v: want one writer, one bound", n, bounds)
				}
				if row.wrap && bounds[0] != 0 {
					t.Errorf("bound %d for a connection without a reachable socket, want 0", bounds[0])
				}
				if !row.wrap {
					// A quarter of the send buffer, less 1/16 for each TLS layer.
					want := int64(<-sndbuf) / 4
					if row.tls {
						want -= want / 16
					}
					if bounds[0] != want {
						t.Errorf("bound %d, want %d from the socket under the connection", bounds[0], want)
					}
				}
			})
		}
	}
}

// TestSendBufferReadOnce: the send buffer size is read at most once
// per connection, and never for requests without a body (GETs) nor for
// bodies that do not qualify for the inline write anyway (no GetBody).
// With DisableKeepAlives every POST has its own connection and its own read.
// (Reading it per request, or for GETs, fails a row.)
func TestSendBufferReadOnce(t *testing.T) {
	for _, row := range []struct {
		name        string
		noKeepAlive bool
		gets, posts int
		noGetBody   int
		wantConns   int
	}{
		{"gets", false, 4, 0, 0, 0},
		{"noGetBody", false, 0, 0, 3, 0},
		{"posts", false, 2, 5, 2, 1},
		{"noKeepAlive", true, 1, 3, 0, 3},
	} {
		t.Run(row.name, func(t *testing.T) {
			tr := &Transport{DisableKeepAlives: row.noKeepAlive}
			defer tr.CloseIdleConnections()
			p := newInlineProbe(t, tr)
			s := startInlineServer(t, false, false, nil)
			for range row.gets {
				resp, err := tr.RoundTrip(newInlineReq(t, "GET", s.url+"/", nil))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if r := <-s.reqs; len(r.body) != 0 {
					t.Fatalf("GET carried %d bytes", len(r.body))
				}
			}
			for range row.noGetBody {
				body := patterned(100)
				req := newInlineReq(t, "POST", s.url+"/", bytes.NewReader(body))
				req.GetBody = nil
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if r := <-s.reqs; !bytes.Equal(r.body, body) {
					t.Fatalf("server read %d bytes, not the body sent", len(r.body))
				}
			}
			for i := range row.posts {
				postInline(t, tr, s, patterned(100+i))
			}
			bounds, per := p.reads()
			if len(per) != row.wantConns || len(bounds) != row.wantConns {
				t.Fatalf("send buffer reads %v on %d connections, want one on each of %d", bounds, len(per), row.wantConns)
			}
			for _, n := range per {
				if n != 1 {
					t.Errorf("send buffer read %d times on one connection, want once", n)
				}
			}
		})
	}
}

// newInlineReq is http.NewRequest failing the test on error.
func newInlineReq(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
