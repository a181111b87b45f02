package transport

import (
	"net"
	"runtime"
	"sync"
	"testing"
)

// TestInline9QueueReadAfterBody: on a kept connection to a server that
// reads every body before answering, each POST after the first looks at
// the socket's send queue once, finds it empty and writes its body inline;
// the first POST does not look.
func TestInline9QueueReadAfterBody(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the send queue is read on Linux only; elsewhere a connection's later bodies go to the body writer")
	}
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	p := newInline9Probe(t, tr)
	var mu sync.Mutex
	var queued []int
	testHookSendQueue = func(n int) {
		mu.Lock()
		queued = append(queued, n)
		mu.Unlock()
	}
	t.Cleanup(func() { testHookSendQueue = nil })
	s := startInline9Server(t, false, false, nil)
	for i := range 3 {
		postInline9(t, tr, s, patterned(1000+i))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queued) != 2 || queued[0] != 0 || queued[1] != 0 {
		t.Errorf("send queue readings %v, want two readings of 0 (the second and third POST)", queued)
	}
	if n := p.asyncWrites(); n != 0 {
		t.Errorf("%d body writers, want 0: an empty queue leaves the body inline", n)
	}
	if _, per := p.reads(); len(per) != 1 {
		t.Errorf("connections %v, want one kept connection", per)
	}
}

// TestInline9QueueReadNoAlloc: reading a connection's send queue
// allocates nothing (a closure capturing its results allocated three
// times per POST).
func TestInline9QueueReadNoAlloc(t *testing.T) {
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
	q := newSendQueue(rc)
	if !q.empty() {
		t.Fatal("a fresh connection's send queue is not empty")
	}
	if n := testing.AllocsPerRun(100, func() { q.empty() }); n != 0 {
		t.Errorf("a send queue reading allocates %.0f times, want 0", n)
	}
}
