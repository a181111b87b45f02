package h1conn

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
)

// TestBodyWriterPlanCopyReleased: the body writer's copy of the request
// plan is kept by the connection for its next writer (one allocation less
// per body it sends), and emptied when the writer reports, so an idle
// connection holds no reference to the last request or its body.
// (Not emptying it, or not reusing it, fails.)
func TestBodyWriterPlanCopyReleased(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	raw, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	type wrapped struct{ net.Conn }
	var writers atomic.Int32
	cfg := testConfig()
	cfg.BodyWriter = func(*Conn) { writers.Add(1) }
	pc := newTestConn(cfg, wrapped{raw}) // no reachable socket: every body to the writer
	defer pc.Close()
	var first *Outgoing
	for i := range 3 {
		body := bytes.Repeat([]byte("b"), 100+i)
		req, err := http.NewRequest("POST", srv.URL+"/", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := pc.roundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n := writers.Load(); n != int32(i+1) {
			t.Fatalf("request %d: %d body writers, want %d", i, n, i+1)
		}
		if !pc.takeIdle() {
			t.Fatalf("request %d: connection not handed back", i)
		}
		if i == 0 {
			first = pc.asyncOut
		}
		if pc.asyncOut == nil || pc.asyncOut != first {
			t.Errorf("request %d: writer copy %p, want the first one %p again", i, pc.asyncOut, first)
		} else if *pc.asyncOut != (Outgoing{}) {
			t.Errorf("request %d: the idle connection still holds the request plan (request %p)", i, pc.asyncOut.Req)
		}
	}
}

// TestSendQueueReadingAllocatesNothing: reading a connection's send queue
// allocates nothing (a closure capturing its results allocated three
// times per POST).
func TestSendQueueReadingAllocatesNothing(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the send queue is read on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	q := newSendQueue(rc, nil)
	if !q.empty() {
		t.Fatal("a fresh connection's send queue is not empty")
	}
	if n := testing.AllocsPerRun(100, func() { q.empty() }); n != 0 {
		t.Errorf("a send queue reading allocates %.0f times, want 0", n)
	}
}
