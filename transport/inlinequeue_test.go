package transport

import (
	"runtime"
	"sync"
	"testing"
)

// TestSendQueueReadAfterBody: on a kept connection to a server that
// reads every body before answering, each POST after the first looks at
// the socket's send queue once, finds it empty and writes its body inline;
// the first POST does not look.
func TestSendQueueReadAfterBody(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the send queue is read on Linux only; elsewhere a connection's later bodies go to the body writer")
	}
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	p := newInlineProbe(t, tr)
	var mu sync.Mutex
	var queued []int
	tr.h1cfg.SendQueue = func(n int) {
		mu.Lock()
		queued = append(queued, n)
		mu.Unlock()
	}
	s := startInlineServer(t, false, false, nil)
	for i := range 3 {
		postInline(t, tr, s, patterned(1000+i))
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
