package transport

import (
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// An answer before the request body was read: the server reads the head
// only, answers 413 and leaves the connection open without reading (so
// the client's body write stalls once the socket buffers are full, and
// never fails on its own). The answer is returned; the connection, whose
// request was not sent whole, is not reused.
var h1EarlyRows = []scenario{
	{name: "early/413-before-body", raw: func(c *rawConn) {
		tp := textproto.NewReader(c.br)
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		h, _ := tp.ReadMIMEHeader()
		h.Del("Host") // its port differs per server
		method, uri, _ := strings.Cut(line, " ")
		uri, _, _ = strings.Cut(uri, " ")
		c.s.record(seenRequest{Method: method, URI: uri, Header: http.Header(h)})
		io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
		<-c.s.close
	}, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "POST", srv.URL, &streamBody{strings.NewReader(big)}).WithContext(h1BoundedCtx(t))
		return []any{observe(rt, req)}
	}},
}

func TestH1EarlyAnswer(t *testing.T) {
	runH1Rows(t, h1EarlyRows)
}
