package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Fault tests: hostile or broken servers. ferry must return an error (never
// hang, never panic), recover for the next request, and leak neither
// goroutines (goleak in TestMain) nor file descriptors.

type fault struct {
	name    string
	script  func(c *rawConn)
	timeout time.Duration // request context timeout
	wantErr bool
	// check inspects the error (or the body error).
	check func(err error) bool
}

var faults = []fault{
	{name: "reset-after-request", script: func(c *rawConn) {
		c.readRequest()
		c.Conn.(*net.TCPConn).SetLinger(0)
	}, wantErr: true},
	{name: "hang-before-head", script: func(c *rawConn) {
		c.readRequest()
		<-c.s.close
	}, timeout: 50 * time.Millisecond, wantErr: true, check: func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
	{name: "hang-mid-body", script: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
		<-c.s.close
	}, timeout: 50 * time.Millisecond, wantErr: true, check: func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
	{name: "garbage", script: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "\x00\x01\x02 not http at all\r\n\r\n")
	}, wantErr: true},
	{name: "huge-chunk-size", script: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n")
	}, wantErr: true},
	{name: "endless-tiny-chunks-with-extensions", script: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		ext := ";" + strings.Repeat("e", 1000)
		for i := 0; i < 100; i++ {
			if _, err := io.WriteString(c, "1"+ext+"\r\na\r\n"); err != nil {
				return
			}
		}
	}, wantErr: true, check: func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "chunked encoding contains too much non-data")
	}},
	{name: "endless-header", script: func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		for i := 0; i < 2000; i++ {
			if _, err := io.WriteString(c, "X-Filler: "+strings.Repeat("f", 100)+"\r\n"); err != nil {
				return
			}
		}
	}, wantErr: true, check: func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "server response headers exceeded")
	}},
	{name: "close-before-any-byte", script: func(c *rawConn) {
		c.readRequest()
	}, wantErr: true, check: func(err error) bool { return errors.Is(err, io.EOF) }},
}

func TestFaults(t *testing.T) {
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			fds := countFDs(t)
			t.Run("requests", func(t *testing.T) { // its cleanups close the servers
				srv := startRawServer(t, f.script)
				good := startHandlerServer(t, hello, false, nil)
				tr := &Transport{MaxResponseHeaderBytes: 64 << 10}
				defer tr.CloseIdleConnections()
				for i := 0; i < 5; i++ {
					ctx := context.Background()
					if f.timeout > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, f.timeout)
						defer cancel()
					}
					req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
					resp, err := tr.RoundTrip(req)
					if err == nil {
						_, err = io.ReadAll(resp.Body)
						resp.Body.Close()
					}
					if f.wantErr && err == nil {
						t.Fatalf("request %d: no error", i)
					}
					if err != nil && f.check != nil && !f.check(err) {
						t.Fatalf("request %d: unexpected error %T %v", i, err, err)
					}
					// The transport recovers: a good server still works.
					resp, err = tr.RoundTrip(newReq(t, "GET", good.URL, nil))
					if err != nil {
						t.Fatalf("good request after fault: %v", err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if string(b) != "hello GET" {
						t.Fatalf("good body %q", b)
					}
				}
				if st := tr.pool.Stats(); st.Idle > 2 {
					t.Errorf("idle connections after faults: %+v", st)
				}
			})
			waitFor(t, func() bool { return countFDs(t) <= fds })
		})
	}
}

// waitFor polls cond (the servers close their sockets asynchronously) for
// up to a generous bound: a loaded machine may take long to run the closing
// goroutines, and a real leak never meets cond however long it waits.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("condition not reached (open fds: %d)", countFDs(t))
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestBodyCloseAbortsBlockedRead: closing the body from another goroutine
// unblocks a Read waiting on a silent server.
func TestBodyCloseAbortsBlockedRead(t *testing.T) {
	srv := startRawServer(t, func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
		<-c.s.close
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(newReq(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	io.ReadFull(resp.Body, buf)
	done := make(chan error)
	go func() {
		_, err := resp.Body.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	resp.Body.Close()
	if err := <-done; err == nil {
		t.Fatal("read after concurrent Close succeeded")
	}
	if st := tr.pool.Stats(); st.Idle != 0 {
		t.Fatalf("aborted connection pooled: %+v", st)
	}
}

// TestNonReplayableChecksIdleConn: a POST without GetBody goes out on an
// idle connection only after the liveness check; a server that closed the
// idle connection costs a fresh dial, never an error.
func TestNonReplayableChecksIdleConn(t *testing.T) {
	srv := startRawServer(t, func(c *rawConn) {
		c.readRequest()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for i := 0; i < 3; i++ {
		resp, err := tr.RoundTrip(newReq(t, "POST", srv.URL, &streamBody{strings.NewReader("data")}))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		waitConnsClosed(srv)
	}
}
