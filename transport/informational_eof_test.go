package transport

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// A connection that ends after a 1xx response and before the final one
// ends the request with net/http's error: the final response's status line
// is cut short, io.ErrUnexpectedEOF, not the io.EOF of a server that sent
// nothing at all.
var informationalEOFRows = []scenario{
	{name: "1xx/eof-after-early-hints", raw: func(c *rawConn) {
		if _, err := c.readRequest(); err == nil {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n")
		}
	}, run: traced(getUnexpectedEOF)},
	{name: "1xx/eof-after-two-early-hints", raw: func(c *rawConn) {
		if _, err := c.readRequest(); err == nil {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </b.css>\r\n\r\n")
		}
	}, run: gets(1, "/")},
	// While the head of an "Expect: 100-continue" request waits for its
	// 100: a 103 comes, then the connection ends.
	{name: "1xx/eof-after-early-hints-awaiting-continue", set: settings{ExpectContinueTimeout: time.Minute}, raw: func(c *rawConn) {
		if _, err := readHeadOnly(c); err == nil {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\n\r\n")
		}
	}, run: postExpectContinue},
	// After the 100 and the body: the final response never comes.
	{name: "1xx/eof-after-continue", set: settings{ExpectContinueTimeout: time.Minute}, raw: func(c *rawConn) {
		if _, err := readHeadOnly(c); err == nil {
			io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
			buf := make([]byte, 4)
			io.ReadFull(c.br, buf)
		}
	}, run: postExpectContinue},
	// A streamed body (written by its own goroutine in ferry).
	{name: "1xx/eof-after-early-hints-streamed-body", raw: func(c *rawConn) {
		if _, err := c.readRequest(); err == nil {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\n\r\n")
		}
	}, run: one("POST", "/", func() io.Reader { return &streamBody{strings.NewReader("streamed")} }, nil)},
}

// getUnexpectedEOF is one GET; it also reports whether the error has
// io.ErrUnexpectedEOF in its chain (errors.Is).
func getUnexpectedEOF(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	resp, err := rt.RoundTrip(newReq(t, "GET", srv.URL, nil))
	return []any{observeResponse(resp, err), errors.Is(err, io.ErrUnexpectedEOF)}
}

// readHeadOnly reads a request head and leaves its body unread; it returns
// the request line.
func readHeadOnly(c *rawConn) (string, error) {
	var first string
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return "", err
		}
		if first == "" {
			first = strings.TrimRight(line, "\r\n")
		}
		if line == "\r\n" || line == "\n" {
			return first, nil
		}
	}
}

func TestInformationalThenEOFMatchesNetHTTP(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	runDiffRows(t, informationalEOFRows, cert)
}
