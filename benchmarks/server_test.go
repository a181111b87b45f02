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
	for _, s := range childServers {
		if os.Getenv(s.env) != "" {
			s.serve()
			return
		}
	}
	pinBenchmarks()
	code := m.Run()
	for _, s := range childServers {
		if s.stop != nil {
			s.stop()
		}
	}
	os.Exit(code)
}

// A childServer is one of the benchmark servers: this test binary
// re-executed with env set runs serve instead of the benchmarks. It is
// started by the first start call and stopped when the benchmarks end.
type childServer struct {
	env   string
	serve func()

	once sync.Once
	addr string
	stop func()
	err  error
}

// childServers are the servers a benchmark may start.
var childServers = []*childServer{h1Child, h2Child, h2cChild, h3Child}

// start starts the child once and returns the address it serves on.
func (s *childServer) start(b *testing.B) string {
	s.once.Do(func() {
		s.addr, s.stop, s.err = benchchild.Start(s.env)
	})
	if s.err != nil {
		b.Fatal(s.err)
	}
	return s.addr
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

var h1Child = &childServer{env: serverEnv, serve: runServer}

func startServer(b *testing.B) string { return h1Child.start(b) }
