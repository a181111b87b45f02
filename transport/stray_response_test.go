package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A server that writes a second response behind the first one, in the same
// write or just after it, before the client has read the first to its end.
// The bytes of that stray response wait below the client's read buffer: in
// the socket, when the read that took the first response's last bytes was
// cut to what was left of the body (io.Copy of a large body), or inside
// tls.Conn, as records it has not handed out yet. A request sent on the
// connection at once must not take them for its response: net/http's read
// loop sees them and drops the connection, so the request goes out on a
// new one and gets its own answer. Each scenario runs on net/http and on
// ferry, each against its own server, and every follow-up must get the
// body naming its own request.

// strayResponse is what the server writes behind the first response.
const strayResponse = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nSTRAY"

// strayFollowUps is how many first-response and follow-up pairs a
// scenario runs: a miss that depends on timing shows within them.
const strayFollowUps = 40

// strayWriteMode is how the server writes the first response and the stray
// one.
type strayWriteMode int

const (
	// strayOneWrite: both in one write (one TLS record each).
	strayOneWrite strayWriteMode = iota
	// straySplitRecords: the stray response in two TLS records, all in one
	// TCP write.
	straySplitRecords
	// strayInLastRecord: the end of the response and the stray response in
	// one TLS record.
	strayInLastRecord
	// strayLater: the first part of the stray response with the end of the
	// response, the rest in a write of its own a little later.
	strayLater
)

type strayScenario struct {
	name    string
	tls     bool
	length  int  // body length of the first response
	chunked bool // the first response is chunked
	readAll bool // the client reads the first body with io.ReadAll, else io.Copy
	mode    strayWriteMode
	// wrapDial: the client dials through a DialContext whose connection
	// hides its socket (ferry watches such a connection while idle).
	wrapDial bool
	// handOff: one connection per host, and the follow-up waits for it
	// while the first body is read, so it is handed the connection the
	// moment that body ends.
	handOff bool
}

func TestStrayResponseNotTakenByNextRequest(t *testing.T) {
	const big = 300 << 10
	scenarios := []strayScenario{
		{name: "length/copy", length: big},
		{name: "length/readall", length: big, readAll: true},
		{name: "chunked/copy", length: big, chunked: true},
		{name: "chunked/readall", length: big, chunked: true, readAll: true},
		{name: "length/copy/stray-later", length: big, mode: strayLater},
		{name: "tls/small/readall", tls: true, length: 100, readAll: true},
		{name: "tls/length/copy", tls: true, length: big},
		{name: "tls/length/readall", tls: true, length: big, readAll: true},
		{name: "tls/chunked/copy", tls: true, length: big, chunked: true},
		{name: "tls/length/copy/split-records", tls: true, length: big, mode: straySplitRecords},
		{name: "tls/small/readall/split-records", tls: true, length: 100, readAll: true, mode: straySplitRecords},
		{name: "tls/length/copy/in-last-record", tls: true, length: big, mode: strayInLastRecord},
		{name: "tls/small/copy/in-last-record", tls: true, length: 100, mode: strayInLastRecord},
		{name: "tls/length/copy/stray-later", tls: true, length: big, mode: strayLater},
		{name: "length/copy/wrapped-dial", length: big, wrapDial: true},
		{name: "tls/length/copy/wrapped-dial", tls: true, length: big, wrapDial: true},
		{name: "length/copy/handed-to-waiter", length: big, handOff: true},
		{name: "tls/length/copy/handed-to-waiter", tls: true, length: big, handOff: true},
	}
	for _, sc := range scenarios {
		for _, side := range []string{"nethttp", "ferry"} {
			t.Run(side+"/"+sc.name, func(t *testing.T) {
				t.Parallel()
				runStrayScenario(t, sc, side)
			})
		}
	}
}

func runStrayScenario(t *testing.T, sc strayScenario, side string) {
	url, tlsCfg := startStrayServer(t, sc)
	std := &http.Transport{TLSClientConfig: tlsCfg}
	if sc.wrapDial {
		std.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := new(net.Dialer).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return struct{ net.Conn }{c}, nil
		}
	}
	if sc.handOff {
		std.MaxConnsPerHost = 1
	}
	var rt http.RoundTripper = std
	if side == "ferry" {
		rt = From(std)
	}
	defer closeIdle(rt)
	get := func(path string) (*http.Response, error) {
		return rt.RoundTrip(newReq(t, "GET", url+path, nil))
	}
	var failed, errs int
	for i := range strayFollowUps {
		resp, err := get("/first-" + strconv.Itoa(i))
		if err != nil {
			t.Fatalf("first request %d: %v", i, err)
		}
		if resp.ContentLength >= 0 && resp.ContentLength != int64(sc.length) {
			// Another request's response (net/http, after a follow-up took
			// the stray one): counted, not read.
			resp.Body.Close()
			failed++
			if side == "ferry" {
				t.Fatalf("first request %d got a response of %d bytes", i, resp.ContentLength)
			}
			continue
		}
		want := "/next-" + strconv.Itoa(i)
		type result struct {
			resp *http.Response
			err  error
		}
		next := make(chan result, 1)
		if sc.handOff {
			go func() {
				resp, err := get(want)
				next <- result{resp, err}
			}()
			time.Sleep(2 * time.Millisecond) // let it queue for the connection
		}
		var n int64
		if sc.readAll {
			var b []byte
			b, err = io.ReadAll(resp.Body)
			n = int64(len(b))
		} else {
			n, err = io.Copy(countingWriter{new(int64)}, resp.Body)
		}
		resp.Body.Close()
		if err != nil || n != int64(sc.length) {
			t.Fatalf("first response %d: %d bytes, %v", i, n, err)
		}
		if sc.handOff {
			r := <-next
			resp, err = r.resp, r.err
		} else {
			// At once: a connection reused within microseconds.
			resp, err = get(want)
		}
		if err != nil {
			// A clear error is allowed; the request is replayable, so
			// neither client is expected to give one.
			errs++
			t.Logf("follow-up %d: %v", i, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != want {
			failed++
			if failed <= 3 && side == "ferry" {
				t.Errorf("follow-up %d got %q (%v), want its own response %q", i, b, err, want)
			}
		}
	}
	if side == "nethttp" {
		// net/http's read loop pools the connection before it peeks for
		// more, so a request sent at once now and then wins the race for
		// bytes already in the socket: its figures are for comparison.
		t.Logf("net/http: %d of %d pairs got another response than their own, %d follow-ups failed", failed, strayFollowUps, errs)
		return
	}
	if failed > 0 {
		t.Errorf("%d of %d follow-ups got another response than their own", failed, strayFollowUps)
	}
	if errs > 0 {
		t.Errorf("%d of %d follow-ups failed", errs, strayFollowUps)
	}
}

// countingWriter counts what io.Copy writes to it. It has no ReadFrom, so
// io.Copy reads the body with its own 32 KiB buffer, as most callers do.
type countingWriter struct{ n *int64 }

func (w countingWriter) Write(p []byte) (int, error) {
	*w.n += int64(len(p))
	return len(p), nil
}

// startStrayServer serves sc on 127.0.0.1: a request for /first-N gets the
// first response with the stray one written behind it as sc.mode says, any
// other request a body naming its path. It returns the base URL and, for
// TLS, the client's configuration.
func startStrayServer(t *testing.T, sc strayScenario) (string, *tls.Config) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var clientCfg *tls.Config
	if sc.tls {
		cert := h3Cert(t)
		cfg := cert.ServerConfig()
		cfg.NextProtos = []string{"http/1.1"}
		ln = &recordCoalescingListener{Listener: ln, cfg: cfg}
		clientCfg = cert.ClientConfig()
	}
	resp := strayFirstResponse(sc)
	srv := serveRaw(t, ln, func(c *rawConn) {
		var co *coalescingConn
		if tc, ok := c.Conn.(*tls.Conn); ok {
			co = tc.NetConn().(*coalescingConn)
		}
		for {
			line, err := c.readRequest()
			if err != nil {
				return
			}
			path := strings.TrimPrefix(line, "GET ")
			if !strings.HasPrefix(path, "/first-") {
				if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(path), path); err != nil {
					return
				}
				continue
			}
			if err := writeWithStray(c, co, resp, sc.mode); err != nil {
				return
			}
		}
	})
	url := srv.URL
	if sc.tls {
		url = "https://" + strings.TrimPrefix(url, "http://")
	}
	return url, clientCfg
}

// strayFirstResponse is the first response of sc, without the stray one.
func strayFirstResponse(sc strayScenario) []byte {
	body := strings.Repeat("0123456789abcdef", sc.length/16+1)[:sc.length]
	var b strings.Builder
	if !sc.chunked {
		fmt.Fprintf(&b, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return []byte(b.String())
	}
	b.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	for len(body) > 0 {
		n := min(len(body), 16<<10)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return []byte(b.String())
}

// strayLaterWait is how long strayLater waits before the rest of the stray
// response: long enough for the client to have sent its next request.
const strayLaterWait = 5 * time.Millisecond

// writeWithStray writes resp and the stray response behind it on c as mode
// says. co is the connection under c's TLS (nil for plain TCP): while it
// holds writes, each Write on c is one TLS record, and its flush sends them
// all in one TCP write.
func writeWithStray(c *rawConn, co *coalescingConn, resp []byte, mode strayWriteMode) error {
	stray := []byte(strayResponse)
	half := len(stray) / 2
	if co == nil {
		switch mode {
		case strayLater:
			if _, err := c.Write(append(resp[:len(resp):len(resp)], stray[:half]...)); err != nil {
				return err
			}
			time.Sleep(strayLaterWait)
			_, err := c.Write(stray[half:])
			return err
		default:
			_, err := c.Write(append(resp[:len(resp):len(resp)], stray...))
			return err
		}
	}
	var writes [][]byte
	switch mode {
	case strayOneWrite:
		writes = [][]byte{resp, stray}
	case straySplitRecords:
		writes = [][]byte{resp, stray[:half], stray[half:]}
	case strayInLastRecord:
		// A large body ends in a record larger than bufio's buffer, so
		// the client reads it straight into its own buffer, cut to what
		// is left of the body: the stray response stays in tls.Conn.
		cut := len(resp) - 10
		if len(resp) > 64<<10 {
			cut = len(resp) - 8000
		}
		writes = [][]byte{resp[:cut], append(resp[cut:len(resp):len(resp)], stray...)}
	case strayLater:
		writes = [][]byte{resp, stray[:half]}
	}
	co.hold()
	for _, w := range writes {
		if _, err := c.Write(w); err != nil {
			co.flush()
			return err
		}
	}
	if err := co.flush(); err != nil {
		return err
	}
	if mode == strayLater {
		time.Sleep(strayLaterWait)
		_, err := c.Write(stray[half:])
		return err
	}
	return nil
}

// recordCoalescingListener accepts TLS connections over coalescingConns.
type recordCoalescingListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *recordCoalescingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&coalescingConn{Conn: c}, l.cfg), nil
}

// coalescingConn gathers the writes made while it holds them (TLS records,
// one per write) and sends them in one write when flushed, so that several
// records reach the client in one TCP segment.
type coalescingConn struct {
	net.Conn
	mu   sync.Mutex // guards held and buf
	held bool
	buf  []byte
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.held {
		c.buf = append(c.buf, p...)
		c.mu.Unlock()
		return len(p), nil
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// hold starts gathering writes.
func (c *coalescingConn) hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

// flush sends what was gathered in one write and stops gathering.
func (c *coalescingConn) flush() error {
	c.mu.Lock()
	buf := c.buf
	c.buf, c.held = nil, false
	c.mu.Unlock()
	_, err := c.Conn.Write(buf)
	return err
}
