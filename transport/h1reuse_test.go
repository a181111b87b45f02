package transport

import (
	"io"
	"log"
	"testing"
)

// Connection reuse after answers net/http does not reuse a connection
// after: a final status below 200, and bytes beyond the end of the
// response, which must never be read as the answer to the next request.
var h1ReuseRows = []scenario{
	{name: "reuse/status-below-100", raw: rawRespond(
		"HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "reuse/101-without-upgrade", raw: rawRespond(
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	// net/http notices the extra bytes on the idle connection and closes
	// it (logging "Unsolicited response"); the rows wait for that before
	// the second request, so they compare outcomes, not that race.
	{name: "reuse/head-with-body-bytes", raw: rawRespond(
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1Settled(one("HEAD", "/", nil, nil))},
	{name: "reuse/204-with-body-bytes", raw: rawRespond(
		"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfake!",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1Settled(gets(1, "/"))},
	{name: "reuse/bytes-after-content-length", raw: rawRespond(
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1Settled(gets(1, "/"))},
	{name: "reuse/bytes-after-chunked", raw: rawRespond(
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nEXTRA",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1Settled(gets(1, "/"))},
}

func TestH1ConnReuse(t *testing.T) {
	// net/http logs the unsolicited bytes through the standard logger.
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	runH1Rows(t, h1ReuseRows)
}
