package transport

import "testing"

// A chunked body cut short in its trailer section fails with net/http's
// errors (which are not io.ErrUnexpectedEOF).
var h1TrailerRows = []scenario{
	{name: "trailer/cut-in-section", raw: rawRespondClose("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-A: 1\r\n"), run: gets(1, "/")},
	{name: "trailer/cut-after-last-chunk", raw: rawRespondClose("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"), run: gets(1, "/")},
	{name: "trailer/cut-one-byte-in", raw: rawRespondClose("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX"), run: gets(1, "/")},
	{name: "trailer/cut-after-cr", raw: rawRespondClose("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r"), run: gets(1, "/")},
}

func TestH1Trailers(t *testing.T) {
	runH1Rows(t, h1TrailerRows)
}
