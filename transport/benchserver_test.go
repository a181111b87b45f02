package transport

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/ferryhttp/ferry/internal/benchchild"
)

// The benchmark server runs in a child process (this test binary re-executed
// with benchServerEnv set) so the client's own CPU, syscalls and context
// switches can be counted apart from the server's. It is a minimal HTTP/1.1
// keep-alive responder: it answers every request head with a fixed response
// of benchHeaders header fields and a benchBodyLen-byte body.

const (
	benchServerEnv = "FERRY_BENCH_SERVER"
	benchBodyLen   = 128
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
	benchchild.Serve(ln, func(c net.Conn) { benchchild.ServeCannedHTTP1(c, resp) })
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
