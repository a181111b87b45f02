package h1conn

import (
	"errors"
	"net"
	"testing"
)

// TestCloseAndReleaseOnce: CloseAndRelease closes the connection and tells
// the owner once, with the slot to free; a second call (a body's Close
// after the exchange failed) does nothing, so a MaxConnsPerHost slot is
// never freed twice.
func TestCloseAndReleaseOnce(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	pc := newTestConn(testConfig(), client)
	if err := pc.CloseAndRelease(); err != nil {
		t.Fatalf("first CloseAndRelease: %v", err)
	}
	if err := pc.CloseAndRelease(); err != nil {
		t.Fatalf("second CloseAndRelease: %v", err)
	}
	pc.Close() // the pool closing it as well counts nothing more
	if pc.closes != 1 || pc.released != 1 {
		t.Fatalf("owner told %d closes, %d releases; want 1 and 1", pc.closes, pc.released)
	}
	if _, err := server.Read(make([]byte, 1)); err == nil {
		t.Fatal("the network connection is still open")
	}
}

// TestAbortFirstErrorOfCurrentRequest: an abort names the request
// generation it is for. The first abort of the request in flight wins (a
// later CancelRequest does not replace its context's error), and an abort
// for an earlier request (its context ended after it finished) leaves the
// current one alone.
func TestAbortFirstErrorOfCurrentRequest(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	pc := newTestConn(testConfig(), client)
	defer pc.Close()
	first, second := errors.New("first"), errors.New("second")
	pc.Abort(pc.gen+1, first) // not the request in flight
	if err := pc.Aborted(); err != nil {
		t.Fatalf("an abort for another generation took effect: %v", err)
	}
	pc.Abort(pc.gen, first)
	pc.Abort(pc.gen, second)
	if err := pc.Aborted(); err != first {
		t.Fatalf("Aborted() = %v, want the first abort's error", err)
	}
}
