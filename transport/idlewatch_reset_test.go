package transport

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// TestIdleWatchReset: a hidden-socket connection the server resets (RST)
// while it is idle is not reused: its idle read ends with the reset, and a
// POST (which cannot be retried) goes out on a new connection, as net/http
// sends it. Only a read that ended on the taker's deadline means quiet.
func TestIdleWatchReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
		n     atomic.Int32
	)
	reset := make(chan struct{})
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			first := n.Add(1) == 1
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if first {
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
						<-reset
						c.(*net.TCPConn).SetLinger(0)
						c.Close() // RST: the client's idle read fails with ECONNRESET
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok2")
				}
			}()
		}
	}()
	var dials atomic.Int32
	ft := From(&http.Transport{DialContext: hidingDialer(&dials)})
	ft.DisableHTTP3 = true
	defer ft.CloseIdleConnections()
	u := "http://" + ln.Addr().String() + "/"
	if got := rev10Do(t, ft, "GET", u, nil); got != "ok" {
		t.Fatalf("first: %q", got)
	}
	eventually(t, "an idle read", func() bool { return len(idleWatchStates()) == 1 })
	awaitIdleWatchReads(t)
	close(reset)
	eventually(t, "the idle read to end on the reset", func() bool { return len(idleWatchStates()) == 0 })
	if got := rev10Do(t, ft, "POST", u, nil); got != "ok2" {
		t.Fatalf("POST after the reset: %q", got)
	}
	if d := dials.Load(); d != 2 {
		t.Fatalf("%d dials, want 2", d)
	}
}
