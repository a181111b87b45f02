package transport

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
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
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	resp := benchResponse(nh)
	fmt.Println(ln.Addr().String())
	go func() { // exit when the parent closes our stdin
		b := make([]byte, 1)
		os.Stdin.Read(b)
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		go serveBench(c, resp)
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

func serveBench(c net.Conn, resp []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 16<<10)
	bw := bufio.NewWriterSize(c, 16<<10)
	for {
		// Read one request head (benchmarks send no bodies).
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
		}
		bw.Write(resp)
		if br.Buffered() == 0 {
			if bw.Flush() != nil {
				return
			}
		}
	}
}
