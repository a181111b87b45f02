package transport

import (
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"testing"
	"time"
)

// An "Expect: 100-continue" request answered by a final status with
// "Connection: close" before its body went out, then another request: the
// server sees the POST on the first connection and the next request on a
// new one, on ferry as on net/http. The server logs, per connection, the
// request lines it reads and whether the connection ended (EOF) after them;
// what each transport made the server see is compared.
func TestContinueRefusedWithCloseThenNextRequestMatchesNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		final string // the final response to the POST
		// keepReading: the server neither closes nor stops writing after
		// its answer; it reads on (the client must close).
		keepReading bool
	}{
		{"empty-417", "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false},
		{"empty-417-server-reads-on", "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true},
		{"417-with-body", "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 7\r\n\r\nrefused", false},
		{"417-with-body-server-reads-on", "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 7\r\n\r\nrefused", true},
		{"401-close-delimited", "HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\nno", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs [2][]string
			var obs [2][]observation
			for i, impl := range []string{"nethttp", "ferry"} {
				logs[i], obs[i] = continueCloseOrder(t, impl, tc.final, tc.keepReading)
			}
			// Events of different connections interleave as the
			// goroutines run (net/http closes a connection on its read
			// loop's goroutine after RoundTrip returned): each
			// connection's own sequence, in connection order, is compared.
			logs[0], logs[1] = byConnection(logs[0]), byConnection(logs[1])
			if fmt.Sprint(logs[0]) != fmt.Sprint(logs[1]) {
				t.Errorf("the server saw\nnet/http: %q\nferry:    %q", logs[0], logs[1])
			}
			if fmt.Sprint(obs[0]) != fmt.Sprint(obs[1]) {
				t.Errorf("client observations differ\nnet/http: %+v\nferry:    %+v", obs[0], obs[1])
			}
		})
	}
}

// continueCloseOrder runs the POST and a GET with impl's transport against a
// server that answers the POST with final (without reading its body), then
// stops writing and reads until the client closes (keepReading: reads
// further requests); it returns the server's log
// of connection ids and request lines, and what the client saw.
func continueCloseOrder(t *testing.T, impl, final string, keepReading bool) ([]string, []observation) {
	events := make(chan string, 16)
	srv := startRawServer(t, func(c *rawConn) {
		for {
			line, err := readHeadOnly(c)
			if err != nil {
				events <- fmt.Sprintf("conn %d: end", c.n)
				return
			}
			events <- fmt.Sprintf("conn %d: %s", c.n, line)
			if strings.HasPrefix(line, "POST") {
				io.WriteString(c, final)
				// The answer closes the connection: the server stops
				// writing, and reads on until the client closes (a body
				// the client sends after all shows in the log).
				if keepReading {
					// The body, if the client sends it, is read as the
					// next "request line" and shows in the log.
					continue
				}
				c.Conn.(*net.TCPConn).CloseWrite()
				rest, _ := io.ReadAll(c.br)
				if len(rest) > 0 {
					events <- fmt.Sprintf("conn %d: then %q", c.n, rest)
				}
				events <- fmt.Sprintf("conn %d: end", c.n)
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	set := settings{ExpectContinueTimeout: time.Minute}
	rt := set.nethttp(nil)
	if impl == "ferry" {
		rt = set.ferry(nil)
	}
	defer closeIdle(rt)
	var out []observation
	post := newReq(t, "POST", srv.URL+"/upload", strings.NewReader("body\r\n"))
	post.Header.Set("Expect", "100-continue")
	out = append(out, observe(rt, post))
	out = append(out, observe(rt, newReq(t, "GET", srv.URL+"/next", nil)))
	closeIdle(rt)
	// Collect what the server saw until both connections ended (or 5s).
	var log []string
	ends := 0
	timeout := time.After(5 * time.Second)
	for ends < 2 {
		select {
		case e := <-events:
			log = append(log, e)
			if strings.HasSuffix(e, ": end") {
				ends++
			}
		case <-timeout:
			return append(log, "timeout"), out
		}
	}
	return log, out
}

// byConnection orders log lines "conn N: ..." by N, keeping the order of
// each connection's own lines.
func byConnection(log []string) []string {
	out := append([]string(nil), log...)
	sort.SliceStable(out, func(i, j int) bool {
		var a, b int
		fmt.Sscanf(out[i], "conn %d:", &a)
		fmt.Sscanf(out[j], "conn %d:", &b)
		return a < b
	})
	return out
}
