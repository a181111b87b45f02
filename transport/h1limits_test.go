package transport

import (
	"io"
	"strings"
	"testing"
	"time"
)

// Header limits and timeouts across 1xx heads: without a Got1xxResponse
// hook every head counts against one MaxResponseHeaderBytes budget (net/http
// counts the bytes it read), and the error names the configured limit;
// ResponseHeaderTimeout covers the 1xx heads and the final one together.
var h1LimitRows = []scenario{
	{name: "limits/1xx-six-times", raw: rawRespond(strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 6) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "limits/1xx-over-header-limit", set: settings{MaxResponseHeaderBytes: 300}, raw: rawRespond(strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 10) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "limits/header-timeout-after-1xx", set: settings{ResponseHeaderTimeout: 100 * time.Millisecond}, raw: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
		<-c.s.close
	}, run: gets(1, "/")},
}

func TestH1ResponseLimits(t *testing.T) {
	runH1Rows(t, h1LimitRows)
}
