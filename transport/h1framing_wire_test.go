package transport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The framing of a request without a body (nil Body,
// http.NoBody) against one with a body, for every caller-set
// Transfer-Encoding, with and without a Trailer and Expect: 100-continue:
// what reaches the server must be what net/http sends.

// wireCapture is what a loopback server received for one request.
type wireCapture struct {
	Line     string      // request line
	Header   http.Header // head fields as received (order ignored)
	Body     string      // body bytes as framed on the wire (chunk sizes, last chunk, trailer)
	Leftover string      // bytes after the body, up to the client's close
	Result   string      // what the client got: status or error
}

// wireServerMode says how the capturing server treats Expect: 100-continue.
type wireServerMode int

const (
	wireSend100  wireServerMode = iota // 100 Continue after the head, then the body is read
	wireFinalNow                       // a final answer at once, the body is not read
)

// captureOneRequest accepts one connection, reads one request as mode
// says, answers 200 with Connection: close and reads what follows until
// the client closes.
func captureOneRequest(ln net.Listener, mode wireServerMode, out chan<- wireCapture) {
	var c wireCapture
	defer func() { out <- c }()
	conn, err := ln.Accept()
	if err != nil {
		c.Line = "accept: " + err.Error()
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard, no timing assertion
	br := bufio.NewReader(conn)
	tp := textproto.NewReader(br)
	if c.Line, err = tp.ReadLine(); err != nil {
		c.Line = "read line: " + err.Error()
		return
	}
	mh, err := tp.ReadMIMEHeader()
	if err != nil {
		c.Line += " / read head: " + err.Error()
		return
	}
	c.Header = http.Header(mh)
	expect := strings.EqualFold(mh.Get("Expect"), "100-continue")
	if expect && mode == wireFinalNow {
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		rest, _ := io.ReadAll(br)
		c.Leftover = string(rest)
		return
	}
	if expect {
		io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n")
	}
	var body strings.Builder
	switch {
	case len(mh["Transfer-Encoding"]) > 0:
		if err := readChunkedRaw(br, &body); err != nil {
			body.WriteString(" / " + err.Error())
		}
	case mh.Get("Content-Length") != "":
		n, _ := strconv.Atoi(mh.Get("Content-Length"))
		b := make([]byte, n)
		k, err := io.ReadFull(br, b)
		body.Write(b[:k])
		if err != nil {
			body.WriteString(" / " + err.Error())
		}
	}
	c.Body = body.String()
	io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
	rest, _ := io.ReadAll(br)
	c.Leftover = string(rest)
}

// readChunkedRaw copies a chunked body, framing included, into b.
func readChunkedRaw(br *bufio.Reader, b *strings.Builder) error {
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return err
		}
		size, err := strconv.ParseInt(strings.TrimRight(line, "\r\n"), 16, 64)
		if err != nil {
			return err
		}
		if size == 0 {
			for { // trailer fields up to the blank line
				line, err := br.ReadString('\n')
				b.WriteString(line)
				if err != nil {
					return err
				}
				if line == "\r\n" {
					return nil
				}
			}
		}
		data := make([]byte, size+2)
		k, err := io.ReadFull(br, data)
		b.Write(data[:k])
		if err != nil {
			return err
		}
	}
}

// wireBody is one kind of request body.
type wireBody struct {
	name string
	set  func(r *http.Request)
}

var wireBodies = []wireBody{
	{"nil", func(r *http.Request) { r.Body, r.GetBody, r.ContentLength = nil, nil, 0 }},
	{"NoBody", func(r *http.Request) { r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, 0 }},
	{"bytes", func(r *http.Request) {
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader("hello")), 5
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("hello")), nil }
	}},
	// Unknown length (ContentLength 0 with a body): net/http probes a GET's
	// body for emptiness (transferWriter.probeRequestBody).
	{"stream", func(r *http.Request) {
		r.Body, r.GetBody, r.ContentLength = io.NopCloser(onlyReader{strings.NewReader("hello")}), nil, 0
	}},
	{"emptystream", func(r *http.Request) {
		r.Body, r.GetBody, r.ContentLength = io.NopCloser(onlyReader{strings.NewReader("")}), nil, 0
	}},
}

// onlyReader hides every method but Read (no WriterTo, not known to be in
// memory).
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// captureWire sends the request build makes through rt to a fresh loopback
// server in mode and returns what the server saw.
func captureWire(t *testing.T, rt http.RoundTripper, mode wireServerMode, build func(url string) *http.Request) wireCapture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out := make(chan wireCapture, 1)
	go captureOneRequest(ln, mode, out)
	req := build("http://" + ln.Addr().String() + "/w")
	resp, err := rt.RoundTrip(req)
	result := ""
	if err != nil {
		result = "error: " + err.Error()
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		result = resp.Status
	}
	closeIdle(rt)
	c := <-out
	c.Result = result
	// The address differs between runs.
	delete(c.Header, "Host")
	return c
}

// TestBodylessFramingMatchesNetHTTP compares, byte for byte, the body framing
// net/http and ferry put on the wire for every combination of body kind,
// caller Transfer-Encoding, method, Trailer and Expect: 100-continue (the
// server answering with 100 Continue, or with a final status at once).
func TestBodylessFramingMatchesNetHTTP(t *testing.T) {
	tes := []struct {
		name string
		te   []string
	}{{"te=nil", nil}, {"te=chunked", []string{"chunked"}}, {"te=identity", []string{"identity"}}}
	expects := []struct {
		name string
		set  bool
		mode wireServerMode
	}{{"noexpect", false, wireSend100}, {"expect/100", true, wireSend100}, {"expect/final", true, wireFinalNow}}
	for _, body := range wireBodies {
		for _, te := range tes {
			for _, method := range []string{"GET", "POST", "DELETE"} {
				for _, trailer := range []bool{false, true} {
					for _, ex := range expects {
						if body.name == "stream" && te.name == "te=identity" {
							// Sent unframed until EOF: where the body ends
							// depends on when the client closes.
							continue
						}
						name := fmt.Sprintf("%s/%s/%s/trailer=%v/%s", body.name, te.name, method, trailer, ex.name)
						t.Run(name, func(t *testing.T) {
							if why := wireKnownDiff(body.name, te.name, method, ex.name); why != "" {
								t.Skip("test: known divergence, fix outside plan/h1write.go: " + why)
							}
							build := func(u string) *http.Request {
								req, err := http.NewRequest(method, u, nil)
								if err != nil {
									t.Fatal(err)
								}
								body.set(req)
								req.TransferEncoding = te.te
								if trailer {
									req.Trailer = http.Header{"X-Sum": {"7"}}
								}
								if ex.set {
									req.Header.Set("Expect", "100-continue")
								}
								return req
							}
							nt := &http.Transport{ExpectContinueTimeout: 10 * time.Second}
							ft := &Transport{ExpectContinueTimeout: 10 * time.Second}
							want := captureWire(t, nt, ex.mode, build)
							got := captureWire(t, ft, ex.mode, build)
							if !reflect.DeepEqual(want, got) {
								t.Errorf("wire differs\nnet/http: %+q\nferry:    %+q", want, got)
							}
						})
					}
				}
			}
		}
	}
}

// wireKnownDiff names the rows where ferry still differs from net/http,
// and why; "" for every other row (the skip, once removed, shows the
// difference).
func wireKnownDiff(body, te, method, expect string) string {
	switch {
	case body == "stream" && te == "te=nil" && method != "POST" && expect != "expect/final":
		// net/http's probe of a GET or DELETE body of unknown length
		// (methods that usually have none) reads one byte first: the same
		// body in chunks of 1 and 4 bytes.
		return "chunk sizes of a GET body of unknown length (net/http probes it)"
	case body == "emptystream" && te == "te=nil" && method != "POST":
		// net/http reads a GET or DELETE body of unknown length before it writes
		// the head (transferWriter.probeRequestBody) and, when it is
		// empty, sends no body at all; ferry sends an empty chunked body.
		return "an empty GET body of unknown length is sent chunked; net/http probes it and sends none"
	}
	return ""
}
