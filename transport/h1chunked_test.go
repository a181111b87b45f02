package transport

import (
	"strings"
	"testing"
)

// Chunk-size lines as net/http reads them: CRLF only, no other CR, under
// 4 KiB, and the framing overhead charged exactly as net/http charges it
// (a one-byte chunk may spend 16 bytes on its size line without limit).
var h1ChunkedRows = []scenario{
	{name: "chunked/size-line-bare-lf", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/size-line-inner-cr", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\r\nabc\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/last-chunk-bare-lf", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\n\r\n"), run: gets(1, "/")},
	{name: "chunked/size-line-trailing-space", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3 \t\r\nabc\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/overhead-at-allowance", raw: rawRespond(h1ManyTinyChunks(9000, 15)), run: h1BodyLen(gets(1, "/"))},
	{name: "chunked/overhead-over-allowance", raw: rawRespond(h1ManyTinyChunks(20000, 16)), run: h1BodyLen(gets(1, "/"))},
	{name: "chunked/size-line-4094", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + strings.Repeat("e", 4092) + "\r\nx\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/size-line-4096", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + strings.Repeat("e", 4094) + "\r\nx\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "chunked/size-line-cut-short", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0"), run: gets(1, "/")},
}

func TestH1ChunkedResponses(t *testing.T) {
	runH1Rows(t, h1ChunkedRows)
}
