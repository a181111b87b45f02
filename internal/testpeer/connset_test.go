package testpeer

import (
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitUntil polls cond for up to a minute (a bound for a slow CI machine,
// not a timing the test depends on).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never true", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServerHoldsOnlyOpenConnections: a server's connection set holds a
// connection from its accept until its script is done, counts every one
// accepted, and closing the server reaches those still open, so a client
// blocked on one gets EOF instead of waiting.
func TestServerHoldsOnlyOpenConnections(t *testing.T) {
	const dials, ended = 10, 6
	srv := StartRaw(t, func(_ int, c net.Conn) {
		var b [1]byte
		c.Read(b[:]) // one byte from the client ends the script
	})
	var clients []net.Conn
	for range dials {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	waitUntil(t, "every connection open at the server", func() bool { return srv.Live() == dials })
	for _, c := range clients[:ended] {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the ended scripts' connections gone", func() bool { return srv.Live() == dials-ended })
	if open, accepted := srv.conns.counts(); open != dials-ended || accepted != dials {
		t.Fatalf("%d open and %d accepted, want %d and %d", open, accepted, dials-ended, dials)
	}

	srv.Abort()
	for i, c := range clients[ended:] {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("client %d of the open ones read %d bytes, %v after the server's Abort, want EOF", i, n, err)
		}
	}
	waitUntil(t, "no connection open after Abort", func() bool { return srv.Live() == 0 })
}
