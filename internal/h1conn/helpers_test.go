package h1conn

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// netConnStub stands in for a net.Conn in tests that never reach its I/O.
type netConnStub struct{ net.Conn }

// testConn is a Conn with the smallest owner: a pool of one idle
// connection. It counts what the Owner hooks were told.
type testConn struct {
	Conn
	mu       sync.Mutex // guards idle, closes, released
	idle     bool       // PutIdle took it back
	closes   int        // Closed calls
	released int        // Closed(true) calls
}

func (c *testConn) PutIdle() error {
	c.mu.Lock()
	c.idle = true
	c.mu.Unlock()
	return nil
}

func (c *testConn) Closed(release bool) {
	c.mu.Lock()
	c.closes++
	if release {
		c.released++
	}
	c.mu.Unlock()
}

func (c *testConn) WatchCancel(*http.Request, uint64) {}
func (c *testConn) UnwatchCancel()                    {}

// isIdle reports whether the connection was handed back and takes it: the
// next request may use it.
func (c *testConn) takeIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	idle := c.idle
	c.idle = false
	return idle
}

// testConfig is a Config with net/http's defaults.
func testConfig() *Config { return &Config{MaxHeaderBytes: 10 << 20} }

// newTestConn wraps conn (cleartext) in a testConn with cfg.
func newTestConn(cfg *Config, conn net.Conn) *testConn {
	c := &testConn{}
	c.Init(cfg, c, conn, nil)
	return c
}

// dialTestConn dials addr on loopback.
func dialTestConn(t testing.TB, cfg *Config, addr string) *testConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return newTestConn(cfg, conn)
}

// roundTrip sends req on c as the transport does: checked for reuse (which
// ends the idle watch), planned, cancellation armed, one exchange.
func (c *testConn) roundTrip(req *http.Request) (*http.Response, error) {
	if c.Reused() && !c.FitForReuse(req, 0) {
		return nil, errors.New("connection not fit for reuse")
	}
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	var o Outgoing
	if err := Plan(req, trace, false, false, &o); err != nil {
		return nil, err
	}
	c.StartRequest(ctx, req, trace)
	return c.RoundTrip(&o)
}
