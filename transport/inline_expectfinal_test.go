package transport

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestInlineExpectFinalWithout100: a request with Expect: 100-continue
// and a 64 KiB body in memory, to a server that answers 200 on the head
// (no 100 Continue, connection kept) and reads the body only once the
// client has the answer, over sockets with small buffers. Both transports
// then send the body (the connection stays in step) and return the answer;
// ferry sends it from the body writer, as the body is over the connection's
// inline bound. (Writing it inline, as before the bound, blocked.)
func TestInlineExpectFinalWithout100(t *testing.T) {
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			lc := net.ListenConfig{Control: smallBufferControl}
			ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			release := make(chan struct{})
			res := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					res <- err.Error()
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				_, n, _, err := readInlineHead(br)
				if err != nil {
					res <- err.Error()
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				<-release
				k, err := io.CopyN(io.Discard, br, int64(n))
				res <- fmt.Sprintf("server read %d bytes%s", k, errSuffix(err))
			}()
			d := inlineDialer(true, nil)
			var rt http.RoundTripper = &http.Transport{DialContext: d.DialContext}
			if impl == "ferry" {
				rt = &Transport{DialContext: d.DialContext}
			}
			defer closeIdle(rt)
			const size = 64 << 10
			req := newInlineReq(t, "POST", "http://"+ln.Addr().String()+"/", bytes.NewReader(patterned(size)))
			req.Header.Set("Expect", "100-continue")
			resp, hung, err := roundTripGuarded(rt, req, func() { close(release) })
			if hung {
				t.Fatalf("RoundTrip blocked writing the body until the server read it (%s)", <-res)
			}
			close(release)
			if err != nil {
				t.Fatalf("%v (%s)", err, <-res)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			summary := fmt.Sprintf("status %d %s; %s", resp.StatusCode, got, <-res)
			if want := fmt.Sprintf("status 200 ok; server read %d bytes", size); summary != want {
				t.Errorf("%s, want %s", summary, want)
			}
		})
	}
}
