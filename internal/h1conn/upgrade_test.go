package h1conn

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// answer101 switches protocols and sends the new protocol's first bytes in
// the same write, so that they arrive with the head.
const answer101 = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello"

// serveUpgrade answers one upgrade request with answer101, then echoes
// what it reads until the client shuts its writing side, and says "bye".
func serveUpgrade(c net.Conn) {
	br := bufio.NewReader(c)
	if _, err := http.ReadRequest(br); err != nil {
		return
	}
	if _, err := io.WriteString(c, answer101); err != nil {
		return
	}
	io.Copy(c, br)
	io.WriteString(c, "bye")
}

func upgradeRequest(url string) *http.Request {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	return req
}

// talkUpgraded reads the bytes that came with the 101's head, writes
// "ping", shuts the writing side and reads the rest: what a client of the
// upgraded connection sees, whichever transport made it.
func talkUpgraded(t *testing.T, body io.ReadCloser) string {
	t.Helper()
	// A read that waits for bytes that never come ends the test.
	watchdog := time.AfterFunc(10*time.Second, func() { body.Close() })
	defer watchdog.Stop()
	rw, ok := body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 body %T is not writable", body)
	}
	first := make([]byte, 5)
	if _, err := io.ReadFull(rw, first); err != nil {
		t.Fatalf("reading the bytes sent with the 101: %v", err)
	}
	if _, err := io.WriteString(rw, "ping"); err != nil {
		t.Fatal(err)
	}
	cw, ok := body.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("101 body %T has no CloseWrite", body)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	rest, err := io.ReadAll(rw)
	if err != nil {
		t.Fatal(err)
	}
	return string(first) + "|" + string(rest)
}

// TestUpgradeBodyReadsBufferedBytesFirst: the bytes a server sends right
// behind its 101 head (read into the connection's buffer with it) come
// first from the 101 body, then the connection itself; CloseWrite sends
// the server an EOF and the rest still arrives. net/http is the control.
func TestUpgradeBodyReadsBufferedBytesFirst(t *testing.T) {
	srv := testpeer.StartRaw(t, func(n int, c net.Conn) { serveUpgrade(c) })
	url := "http://" + srv.Addr() + "/"

	ctl := &http.Transport{}
	defer ctl.CloseIdleConnections()
	resp, err := ctl.RoundTrip(upgradeRequest(url))
	if err != nil {
		t.Fatal(err)
	}
	want := talkUpgraded(t, resp.Body)
	resp.Body.Close()

	pc := dialTestConn(t, testConfig(), srv.Addr())
	resp, err = pc.roundTrip(upgradeRequest(url))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	got := talkUpgraded(t, resp.Body)
	resp.Body.Close()
	if got != want || want != "hello|pingbye" {
		t.Fatalf("upgraded connection saw %q, net/http %q; want both %q", got, want, "hello|pingbye")
	}
}

// TestUpgradeBodyCloseWriteUnsupported: over a connection that cannot
// shut down only its writing side (here a net.Pipe), CloseWrite on the 101
// body reports http.ErrNotSupported, as net/http's does, rather than
// closing the connection.
func TestUpgradeBodyCloseWriteUnsupported(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	go serveUpgrade(server)
	pc := newTestConn(testConfig(), client)
	resp, err := pc.roundTrip(upgradeRequest("http://upgrade.test/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	watchdog := time.AfterFunc(10*time.Second, func() { resp.Body.Close() })
	defer watchdog.Stop()
	cw, ok := resp.Body.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("101 body %T has no CloseWrite", resp.Body)
	}
	if err := cw.CloseWrite(); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("CloseWrite over a pipe: %v, want http.ErrNotSupported", err)
	}
	// The connection is still whole: the echo goes on.
	rw := resp.Body.(io.ReadWriteCloser)
	buf := make([]byte, 5)
	if _, err := io.ReadFull(rw, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("after CloseWrite: %q, %v", buf, err)
	}
	if _, err := io.WriteString(rw, "ping"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rw, buf[:4]); err != nil || string(buf[:4]) != "ping" {
		t.Fatalf("echo after CloseWrite: %q, %v", buf[:4], err)
	}
}
