package transport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/ferryhttp/ferry/internal/benchchild"
)

// The benchmark server runs in a child process (this test binary re-executed
// with benchServerEnv set) so the client's own CPU, syscalls and context
// switches can be counted apart from the server's. It is a minimal HTTP/1.1
// keep-alive responder: it answers every request head with a fixed response
// of benchHeaders header fields and a benchBodyLen-byte body.

const (
	benchServerEnv = "FERRY_BENCH_SERVER"
	// slowServerEnv starts the same server answering each request 1 ms
	// late, so that a client's first read finds nothing yet
	// (TestWriteAwaitSyscalls).
	slowServerEnv = "FERRY_SLOW_SERVER"
	benchBodyLen  = 128
)

func runBenchServer() {
	nh, _ := strconv.Atoi(os.Getenv("FERRY_BENCH_HEADERS"))
	if nh == 0 {
		nh = 4
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		benchchild.Fail(err)
	}
	resp := benchResponse(nh)
	if os.Getenv(slowServerEnv) != "" {
		benchchild.Serve(ln, func(c net.Conn) { serveLate(c, resp) })
		return
	}
	benchchild.Serve(ln, func(c net.Conn) { benchchild.ServeCannedHTTP1(c, resp) })
}

// serveLate answers every request on c, whose body it reads first, with
// resp, a millisecond late.
func serveLate(c net.Conn, resp []byte) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		time.Sleep(time.Millisecond)
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

func benchResponse(nh int) []byte {
	s := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(benchBodyLen) + "\r\nContent-Type: text/plain\r\n"
	for i := 2; i < nh; i++ {
		s += fmt.Sprintf("X-Bench-Header-%d: value-%d\r\n", i, i)
	}
	s += "\r\n"
	for i := 0; i < benchBodyLen; i++ {
		s += "x"
	}
	return []byte(s)
}
