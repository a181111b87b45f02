package benchmarks

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The server runs in a child process (this test binary re-executed with
// serverEnv set) so only the client's costs are counted in this process.

const (
	serverEnv = "FERRY_BENCHMARKS_SERVER"
	bodyLen   = 128
)

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		runServer()
		return
	}
	code := m.Run()
	if child != nil {
		child.Process.Kill()
		child.Wait()
	}
	os.Exit(code)
}

var response = func() []byte {
	s := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(bodyLen) + "\r\nContent-Type: text/plain\r\nServer: bench\r\nX-Request-Id: 0123456789\r\n\r\n"
	return []byte(s + strings.Repeat("x", bodyLen))
}()

func runServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	go func() {
		os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		go func(c net.Conn) {
			defer c.Close()
			br := bufio.NewReaderSize(c, 16<<10)
			bw := bufio.NewWriterSize(c, 16<<10)
			for {
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if len(line) <= 2 {
						break
					}
				}
				bw.Write(response)
				if br.Buffered() == 0 && bw.Flush() != nil {
					return
				}
			}
		}(c)
	}
}

var (
	serverOnce sync.Once
	serverAddr string
	serverErr  error
	child      *exec.Cmd
)

func startServer(b *testing.B) string {
	serverOnce.Do(func() {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), serverEnv+"=1")
		if _, err := cmd.StdinPipe(); err != nil {
			serverErr = err
			return
		}
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			serverErr = err
			return
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			serverErr = err
			return
		}
		serverAddr = strings.TrimSpace(line)
		child = cmd
	})
	if serverErr != nil {
		b.Fatal(serverErr)
	}
	return serverAddr
}
