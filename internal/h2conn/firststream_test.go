package h2conn

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// TestFirstRequestOnStreamOne: the first request of every connection goes
// out on stream 1 and the next on stream 3, as with net/http. Servers and
// proxies log the IDs, and net/http keys rules on stream 1 (the GOAWAY
// and "never used" tests below).
func TestFirstRequestOnStreamOne(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"kept_alive", Config{}, "[1 3]"},
		{"strict", Config{StrictMaxConcurrentStreams: true}, "[1 3]"},
		{"single_use", Config{DisableKeepAlives: true}, "[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex // guards ids
			var ids []uint32
			rs := startRawServer(t, func(fr *http2.Framer, id uint32) error {
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				return testpeer.H2OK(fr, id)
			})
			c, err := NewClientConn(dialH2(t, rs.Addr(), false), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for c.ReserveStream() {
				resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+rs.Addr()+"/", nil))
				if err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, resp); got != "ok" {
					t.Fatalf("body %q", got)
				}
				mu.Lock()
				n := len(ids)
				mu.Unlock()
				if n == 2 {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if got := fmt.Sprint(ids); got != tc.want {
				t.Fatalf("server saw streams %s, want %s", got, tc.want)
			}
		})
	}
}

// TestGoAwayWithErrorOnFirstStream: a server that answers the first
// request of a new connection with GOAWAY(last stream 0) and an error code
// is refusing the client, not shutting down gracefully: stream 1 fails
// with "received GOAWAY from server" and that is final (net/http does not
// retry it, so a rate-limiting server is not hammered with new
// connections). Only a later stream gets the retryable graceful-GOAWAY
// error (TestNotProcessedFromServer).
func TestGoAwayWithErrorOnFirstStream(t *testing.T) {
	rs := startRawServer(t, func(fr *http2.Framer, id uint32) error {
		return fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("slow down"))
	})
	c, err := NewClientConn(dialH2(t, rs.Addr(), false), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.RoundTrip(newRequest(t, "GET", "http://"+rs.Addr()+"/", nil))
	const want = "http2: Transport received GOAWAY from server ErrCode:ENHANCE_YOUR_CALM"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if IsRetryable(err) {
		t.Fatal("a GOAWAY with an error code on the first stream is retryable")
	}
	if c.Usable() {
		t.Fatal("connection usable after GOAWAY")
	}
}

// closeAfterPreface starts a loopback server that reads the client preface
// and, once release is closed, closes the connection: a connection that dies
// before its first request. (Closing at once raced the client's first
// ReserveStream: Go 1.27's client could see the close first, about one run
// in three.)
func closeAfterPreface(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.ReadFull(c, make([]byte, len(http2.ClientPreface)))
			<-release
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestNeverUsedClosedConnIsDead: a connection that closed before the
// server's SETTINGS arrived fails its first request with net/http's final
// "could not be established" (not retryable: net/http does not send it
// again), and must then stop taking requests, or every request would fail
// the same way.
func TestNeverUsedClosedConnIsDead(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"kept_alive", Config{}},
		{"strict", Config{StrictMaxConcurrentStreams: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			addr := closeAfterPreface(t, release)
			c, err := NewClientConn(dialH2(t, addr, false), tc.cfg)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			defer c.Close()
			reserved := c.ReserveStream()
			close(release) // now the server closes the connection
			if !reserved {
				t.Fatal("no first stream")
			}
			waitFor(t, "the client to see the close", func() bool { return connClosedSeen(c) })
			_, err = c.RoundTrip(newRequest(t, "GET", "http://"+addr+"/", nil))
			if err == nil || err.Error() != errTextNotEstablished || IsRetryable(err) {
				t.Fatalf("err = %v, want net/http's final %q", err, errTextNotEstablished)
			}
			if c.Usable() {
				t.Fatalf("connection still usable after %v", err)
			}
			if c.ReserveStream() {
				t.Fatal("a closed connection hands out another stream")
			}
		})
	}
}
