package benchchild

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

const testEnv = "FERRY_BENCHCHILD_TEST"

var testResponse = []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

func TestMain(m *testing.M) {
	if os.Getenv(testEnv) != "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			Fail(err)
		}
		Serve(ln, func(c net.Conn) { ServeCannedHTTP1(c, testResponse) })
	}
	goleak.VerifyTestMain(m)
}

// TestStartServesAndStops: the child announces its address, answers two
// requests on one keep-alive connection with the canned response, and
// exits when stopped.
func TestStartServesAndStops(t *testing.T) {
	addr, stop, err := Start(testEnv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := range 2 {
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b := make([]byte, 2)
		if _, err := resp.Body.Read(b); string(b) != "ok" || resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, b, err)
		}
	}
	c.Close()
	stop()
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("child still listening after stop")
	}
}
