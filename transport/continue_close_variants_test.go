package transport

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// An "Expect: 100-continue" POST answered by a final status that ends the
// connection ("Connection: close", HTTP/1.0) before its body went out,
// then a GET, in the ways programs send them: each row gives the POST
// body's kind (in memory, 1 MiB, a slow reader of unknown length, an
// *os.File with and without a length), what the server does after its
// answer (closes at once, keeps the socket open reading on, or stops
// writing and drains), whether the caller reads the POST's response
// before the GET or leaves it unread, TLS, Request.Close, an HTTP/1-only
// transport, and the final answer. A raw server logs, per accepted
// connection, the first line of each request head it reads (and the bytes
// that come after its answer) until the connection ends; ferry's log must
// be net/http's, and so must what the client saw.
//
// Not rows, because net/http's own outcome is a race there: an
// ExpectContinueTimeout of 0 (net/http's writer sends the body unless the
// answer reached its read loop first; ferry always sends it, as
// documented for 0, and a write cut by the server's close is returned by
// net/http when its writer reports first, where ferry returns the answer),
// and the GET sent concurrently with the POST (net/http hands whichever
// connection frees first to a request still waiting for its own dial, so
// the POST may follow the GET on one connection; ferry's requests use
// their own dials).
func TestContinueRefusedWithCloseVariantsMatchNetHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("many rows")
	}
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(file, []byte("BODY-FROM-FILE"), 0o600); err != nil {
		t.Fatal(err)
	}
	bodies := []string{"strings", "bytes-1MiB", "slow-reader", "file", "file-with-length"}
	var rows []continueCloseRow
	for _, body := range bodies {
		for _, server := range []string{"close-at-once", "hold-open", "close-write-and-drain"} {
			for _, caller := range []string{"read-first", "first-unread"} {
				for _, tlsOn := range []bool{false, true} {
					for _, reqClose := range []bool{false, true} {
						rows = append(rows, continueCloseRow{body, time.Second, server, caller, tlsOn, reqClose, false, ""})
					}
				}
			}
		}
	}
	// HTTP/1.1 only (Protocols) on the rows a program most often has.
	for _, body := range bodies {
		rows = append(rows, continueCloseRow{body, time.Second, "hold-open", "first-unread", true, false, true, ""})
	}
	for name := range continueCloseFinals {
		if name == "" {
			continue
		}
		for _, body := range bodies {
			for _, server := range []string{"close-at-once", "hold-open", "close-write-and-drain"} {
				if server == "hold-open" && name == "close-delimited" {
					continue // its body never ends
				}
				callers := []string{"read-first", "first-unread"}
				if strings.HasSuffix(name, "-redirect") {
					callers = []string{"client"}
				}
				if name == "307-redirect" && body != "strings" && body != "bytes-1MiB" {
					continue // http.Client cannot send the body again
				}
				for _, caller := range callers {
					rows = append(rows, continueCloseRow{body, time.Second, server, caller, false, false, false, name})
				}
			}
		}
	}
	for _, row := range rows {
		t.Run(row.String(), func(t *testing.T) {
			var logs [2][]string
			var obs [2][]observation
			for i, impl := range []string{"nethttp", "ferry"} {
				logs[i], obs[i] = row.run(t, impl, cert, file)
			}
			if len(logs[0]) != 2 || !strings.HasPrefix(logs[0][0], "POST /upload ") || !strings.Contains(logs[0][1], " /next ") {
				t.Fatalf("net/http's run did not make the server see the POST, then the GET on a new connection: %q", logs[0])
			}
			if !slices.Equal(logs[0], logs[1]) {
				t.Errorf("the server saw, per connection\nnet/http: %q\nferry:    %q", logs[0], logs[1])
			}
			if fmt.Sprint(obs[0]) != fmt.Sprint(obs[1]) {
				t.Errorf("client observations differ\nnet/http: %+v\nferry:    %+v", obs[0], obs[1])
			}
		})
	}
}

// continueCloseRow is one way of sending the refused POST and the GET.
type continueCloseRow struct {
	body     string        // the POST body's kind (see body)
	wait     time.Duration // ExpectContinueTimeout (1s in every row: see the test)
	server   string        // what the server does after answering the POST
	caller   string        // when the GET is sent
	tls      bool
	reqClose bool   // the POST's Request.Close
	h1Only   bool   // Protocols: HTTP/1 only
	final    string // the answer to the POST; "" is continueCloseFinals[0]
}

// continueCloseFinals are answers to the POST that end its connection.
var continueCloseFinals = map[string]string{
	"":                "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 7\r\n\r\nrefused",
	"empty-417":       "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
	"http10-417":      "HTTP/1.0 417 Expectation Failed\r\nContent-Length: 7\r\n\r\nrefused",
	"chunked-413":     "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n7\r\nrefused\r\n0\r\n\r\n",
	"close-delimited": "HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\nno",
	"200-close":       "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 4\r\n\r\ndone",
	// Followed by http.Client (caller "client"): the next request is the
	// redirect's, a POST with the body again (307) or a GET (303).
	"307-redirect": "HTTP/1.1 307 Temporary Redirect\r\nLocation: /next\r\nConnection: close\r\nContent-Length: 5\r\n\r\nmoved",
	"303-redirect": "HTTP/1.1 303 See Other\r\nLocation: /next\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
}

func (r continueCloseRow) String() string {
	s := fmt.Sprintf("%s/wait-%v/%s/%s", r.body, r.wait, r.server, r.caller)
	if r.tls {
		s += "/tls"
	}
	if r.reqClose {
		s += "/request-close"
	}
	if r.h1Only {
		s += "/h1-only"
	}
	if r.final != "" {
		s += "/" + r.final
	}
	return s
}

// slowReader yields its bytes a few at a time, pausing before each read:
// a body of unknown length still being produced.
type slowReader struct{ rest []byte }

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	time.Sleep(5 * time.Millisecond)
	n := copy(p[:min(len(p), 4)], r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// newBody returns the POST body of kind and its length (-1: unknown).
func (r continueCloseRow) newBody(t *testing.T, file string) (io.Reader, int64) {
	switch r.body {
	case "strings":
		return strings.NewReader("BODY-STRING"), 11
	case "bytes-1MiB":
		return bytes.NewReader(bytes.Repeat([]byte("B"), 1<<20)), 1 << 20
	case "slow-reader":
		return &slowReader{rest: []byte("BODY-SLOWLY")}, -1
	case "file", "file-with-length":
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		if r.body == "file" {
			return f, -1
		}
		return f, int64(len("BODY-FROM-FILE"))
	}
	panic("unknown body " + r.body)
}

// run sends the POST and the GET with impl's transport to a fresh server
// and returns the server's per-connection log and what the client saw.
func (r continueCloseRow) run(t *testing.T, impl string, cert *selfsigned.Cert, file string) ([]string, []observation) {
	final := continueCloseFinals[r.final]
	var mu sync.Mutex // guards conns
	conns := map[int][]string{}
	note := func(n int, e string) {
		mu.Lock()
		conns[n] = append(conns[n], e)
		mu.Unlock()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if r.tls {
		ln = tls.NewListener(ln, cert.ServerConfig())
	}
	ended := make(chan int, 8)
	srv := serveRaw(t, ln, func(c *rawConn) {
		defer func() { ended <- c.n }()
		for {
			line, err := readHeadOnly(c)
			if err != nil {
				note(c.n, "end")
				return
			}
			note(c.n, line)
			if !strings.HasPrefix(line, "POST /upload ") {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				continue
			}
			io.WriteString(c, final)
			switch r.server {
			case "close-at-once":
				note(c.n, "end")
				return
			case "hold-open":
				// Read on: a body or request sent after all shows as
				// the next "request line".
			case "close-write-and-drain":
				closeWrite(c.Conn)
				rest, _ := io.ReadAll(c.br)
				if len(rest) > 0 {
					note(c.n, fmt.Sprintf("then %d bytes", len(rest)))
				}
				note(c.n, "end")
				return
			}
		}
	})
	u := srv.URL
	var tlsCfg *tls.Config
	if r.tls {
		u = "https://" + strings.TrimPrefix(u, "http://")
		tlsCfg = cert.ClientConfig()
	}
	std := settings{ExpectContinueTimeout: r.wait}.nethttp(tlsCfg).(*http.Transport)
	if r.h1Only {
		var p http.Protocols
		p.SetHTTP1(true)
		std.Protocols = &p
	}
	var rt http.RoundTripper = std
	if impl == "ferry" {
		rt = From(std)
	}
	defer closeIdle(rt)
	body, n := r.newBody(t, file)
	post := newReq(t, "POST", u+"/upload", body)
	post.ContentLength = n
	if n < 0 {
		post.ContentLength = 0 // unknown, as http.NewRequest leaves it
	}
	post.Header.Set("Expect", "100-continue")
	post.Close = r.reqClose
	get := newReq(t, "GET", u+"/next", nil)
	var out [2]observation
	// A row that hangs fails instead of stalling the suite.
	hung := time.AfterFunc(10*time.Second, srv.abort)
	defer func() {
		if !hung.Stop() {
			t.Errorf("%s: the row did not end within 10s; its server's connections were closed to end it", impl)
		}
	}()
	switch r.caller {
	case "read-first":
		out[0] = observe(rt, post)
		out[1] = observe(rt, get)
	case "client":
		// http.Client reads (up to a limit) and closes the answer, then
		// sends the redirect's request.
		out[0] = observeResponse((&http.Client{Transport: rt}).Do(post))
	case "first-unread":
		resp, err := rt.RoundTrip(post)
		out[1] = observe(rt, get)
		out[0] = observeResponse(resp, err)
	}
	if c, ok := body.(io.Closer); ok {
		c.Close()
	}
	closeIdle(rt)
	// Wait until every connection the server accepted has ended.
	timeout := time.After(5 * time.Second)
	for {
		mu.Lock()
		open := 0
		for _, evs := range conns {
			if evs[len(evs)-1] != "end" {
				open++
			}
		}
		mu.Unlock()
		srv.mu.Lock()
		accepted := srv.conns
		srv.mu.Unlock()
		mu.Lock()
		all := len(conns) == accepted
		mu.Unlock()
		if open == 0 && all {
			break
		}
		select {
		case <-ended:
		case <-time.After(20 * time.Millisecond):
		case <-timeout:
			return append(connLog(&mu, conns), "timeout"), out[:]
		}
	}
	return connLog(&mu, conns), out[:]
}

// closeWrite shuts the sending side of c (a TCP or TLS connection).
func closeWrite(c net.Conn) {
	switch c := c.(type) {
	case *net.TCPConn:
		c.CloseWrite()
	case *tls.Conn:
		c.CloseWrite()
	}
}

// connLog renders the per-connection events, in accept order.
func connLog(mu *sync.Mutex, conns map[int][]string) []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(conns))
	for n := range len(conns) {
		out = append(out, strings.Join(conns[n], " | "))
	}
	return out
}
