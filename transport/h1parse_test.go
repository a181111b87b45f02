package transport

import (
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"testing"
)

// Response heads read as net/http reads them: a folded field needs its
// colon on the first line, and every head, 1xx and 101 included, goes
// through the framing checks and clean-up.
var h1ParseRows = []scenario{
	{name: "parse/fold-continues-line-without-colon", raw: rawRespond("HTTP/1.1 200 OK\r\nX-Folded\r\n : a\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "parse/fold-after-empty-value", raw: rawRespond("HTTP/1.1 200 OK\r\nX-Folded:\r\n a\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "parse/1xx-bad-content-length", raw: rawRespond("HTTP/1.1 103 Early Hints\r\nContent-Length: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "parse/1xx-unsupported-transfer-encoding", raw: rawRespond("HTTP/1.1 103 Early Hints\r\nTransfer-Encoding: gzip\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "parse/101-switch-conflicting-content-length", raw: rawRespond("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), run: one("GET", "/", nil, func(r *http.Request) {
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "echo")
	})},
	{name: "parse/http10-keep-alive-reused", raw: rawRespond(
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
}

func TestH1ResponseParsing(t *testing.T) {
	runH1Rows(t, h1ParseRows)
}

// TestH1Got1xxHeader: Got1xxResponse sees a 1xx header cleaned up as
// net/http cleans every head (Pragma: no-cache implies Cache-Control,
// Transfer-Encoding and Connection: close removed).
func TestH1Got1xxHeader(t *testing.T) {
	var got [2]textproto.MIMEHeader
	for i, rt := range []http.RoundTripper{settings{}.nethttp(nil), settings{}.ferry(nil)} {
		srv := startRawServer(t, rawRespond("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nPragma: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		req := newReq(t, "GET", srv.URL, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				got[i] = h
				return nil
			},
		}))
		if o := observe(rt, req); o.Err != "" || o.Body != "ok" {
			t.Fatalf("%+v", o)
		}
		closeIdle(rt)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("1xx header\nnet/http: %v\nferry:    %v", got[0], got[1])
	}
}
