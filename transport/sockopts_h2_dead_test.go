package transport

import (
	"io"
	"testing"
	"time"
)

// TestSocketOptionsSharedConnDiesBeforeApply: an HTTP/2 connection that
// dies after a request reserved its stream but before the request's socket
// options were applied fails the setsockopt ("use of closed network
// connection"); nothing was sent, so the request goes to a new connection,
// as it would without options (net/http retries a request its connection
// never took), instead of failing.
func TestSocketOptionsSharedConnDiesBeforeApply(t *testing.T) {
	// A value not in effect, so the guard makes the syscall.
	getOnConnDyingBeforeOptions(t, nil, TOS(0x20))
}

// getOnConnDyingBeforeOptions sends a GET with body and opt over HTTP/2 on
// a transport whose shared connection (warmed by a first request) is
// closed after the request reserved its stream and before opt is applied
// (testHookSharedOptions, once). It fails t unless the request still
// succeeds over HTTP/2 with the hook run once, and returns the transport.
func getOnConnDyingBeforeOptions(t *testing.T, body io.ReadCloser, opt SocketOption) *Transport {
	t.Helper()
	srv := startH2Server(t, h2ServerKind{tlsH2: true}, static(hello), h3Cert(t))
	tr := newH3Transport(t, func(tr *Transport) { tr.ForceAttemptHTTP2 = true })
	if _, _, err := sockOptGet(t, tr, srv.URL, nil, TOS(0x10)); err != nil {
		t.Fatal(err)
	}
	killed := 0
	testHookSharedOptions = func(sc sharedConn) {
		if killed > 0 {
			return
		}
		killed++
		sc.(*h2Shared).sock.conn.Close()
		for deadline := time.Now().Add(10 * time.Second); sc.Usable(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("the connection still usable 10 s after its socket closed")
				return
			}
		}
	}
	t.Cleanup(func() { testHookSharedOptions = nil })
	resp, _, err := sockOptGet(t, tr, srv.URL, body, opt)
	if err != nil {
		t.Fatalf("request on a connection that died before its options: %v", err)
	}
	if killed != 1 || resp.Proto != "HTTP/2.0" {
		t.Fatalf("hook ran %d times, proto %s; want 1, HTTP/2.0", killed, resp.Proto)
	}
	return tr
}
