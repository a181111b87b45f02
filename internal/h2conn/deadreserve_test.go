package h2conn

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// closeSeen is a net.Conn that reports its first Close.
type closeSeen struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeSeen) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestDeadConnClosedAtLastSlot: a dead connection is closed by whoever
// gives back its last slot in use, and not before. The death is Shutdown
// whose context ends while a request is in flight and a slot is reserved;
// the request ends (its socket stays open: the reservation still holds a
// slot), then the reservation is given back, and that closes the socket.
// A reservation asked for meanwhile is refused and holds nothing.
func TestDeadConnClosedAtLastSlot(t *testing.T) {
	held := make(chan struct{}, 1)
	srv := testpeer.StartH2(t, testpeer.H2Script{
		OnHeaders: func(_, _ int, _ *http2.Framer, _ uint32) error {
			held <- struct{}{}
			return nil // never answered: the client cancels it
		},
	})
	nc := &closeSeen{Conn: dialH2(t, srv.Addr(), false), closed: make(chan struct{})}
	c, err := NewClientConn(nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := goRoundTrip(c, newRequest(t, "GET", "http://"+srv.Addr()+"/held", nil).WithContext(ctx))
	<-held
	if !c.ReserveStream() {
		t.Fatal("no second slot on a live connection")
	}
	sctx, scancel := context.WithCancel(context.Background())
	scancel()
	if err := c.Shutdown(sctx); err == nil {
		t.Fatal("Shutdown with an ended context and a stream in flight returned nil")
	}
	if c.Usable() || c.ReserveStream() {
		t.Fatal("a stream on a connection shut down")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	select {
	case <-nc.closed:
		t.Fatal("socket closed while a slot is still reserved")
	default:
	}
	if _, idle := c.IdleSince(); idle {
		t.Fatal("idle with a slot reserved")
	}
	if c.ReserveStream() {
		t.Fatal("a stream on a dead connection")
	}
	c.ReleaseStream() // the last slot
	select {
	case <-nc.closed:
	case <-time.After(20 * time.Second): // hang guard only
		t.Fatal("the socket of the dead connection was not closed at its last slot")
	}
}
