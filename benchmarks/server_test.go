package benchmarks

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/benchchild"
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
	if os.Getenv(h2ServerEnv) != "" {
		runH2Server()
		return
	}
	if os.Getenv(h3ServerEnv) != "" {
		runH3Server()
		return
	}
	pinBenchmarks()
	code := m.Run()
	if stopServer != nil {
		stopServer()
	}
	if h2Server.stop != nil {
		h2Server.stop()
	}
	if h3Server.stop != nil {
		h3Server.stop()
	}
	os.Exit(code)
}

// pinBenchmarks puts this process and the server child on separate cores
// when benchmarks run (benchchild.PinApart), and says so in the log.
func pinBenchmarks() {
	note, err := benchchild.PinApart()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks: not pinned:", err)
		return
	}
	if note != "" {
		fmt.Fprintln(os.Stderr, "benchmarks:", note)
	}
}

var response = func() []byte {
	s := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(bodyLen) + "\r\nContent-Type: text/plain\r\nServer: bench\r\nX-Request-Id: 0123456789\r\n\r\n"
	return []byte(s + strings.Repeat("x", bodyLen))
}()

func runServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		benchchild.Fail(err)
	}
	benchchild.Serve(ln, func(c net.Conn) { benchchild.ServeCannedHTTP1(c, response) })
}

var (
	serverOnce sync.Once
	serverAddr string
	serverErr  error
	stopServer func()
)

func startServer(b *testing.B) string {
	serverOnce.Do(func() {
		serverAddr, stopServer, serverErr = benchchild.Start(serverEnv)
	})
	if serverErr != nil {
		b.Fatal(serverErr)
	}
	return serverAddr
}
