package h2conn

import (
	"context"
	"net"
	"net/http"
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

// TestRefusedReserveClosesDeadConn: a dead connection is closed by whoever
// gives back its last slot in use. A slot counts as busy from the start of
// ReserveStream, so a reservation that is refused can be that last slot:
// the connection died while it was being decided, and the other slots were
// given back meanwhile (finding it still busy, they left it open). Before
// the fix the refusal took its slot back with a plain decrement and nobody
// closed the connection: the transport's registry forgets a dead
// connection without closing it (it counts on this rule), so the socket
// and x/net's goroutines stayed until the server closed the connection.
//
// The death here is the checker's (judge.go): the connection is full of a
// reset the server never acknowledges, and the checker's PING goes
// unanswered. Two requests look for a stream while it pings: A, with no
// other slot in use, and B, with A's. The connection dies; A is refused
// first (it marks the connection dead again and leaves it to B, still
// busy), then B, the last slot.
func TestRefusedReserveClosesDeadConn(t *testing.T) {
	xnetOnly(t) // a slot busy while ReserveStream decides; TestDeadConnClosedAtLastSlot for both
	held := make(chan struct{}, 1)
	srv := testpeer.StartH2(t, testpeer.H2Script{
		Settings:            []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 1}},
		MutePingsAfterReset: true,
		OnHeaders: func(_, stream int, fr *http2.Framer, id uint32) error {
			if stream == 1 {
				held <- struct{}{}
				return nil // never answered: the client resets it
			}
			return testpeer.H2OK(fr, id)
		},
	})
	nc := &closeSeen{Conn: dialH2(t, srv.Addr(), false), closed: make(chan struct{})}
	// The checker's PING goes unanswered; its time limit is the mechanism
	// that kills the connection, not a bound of the test.
	c, err := NewClientConn(nc, Config{HTTP2: &http.HTTP2Config{PingTimeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+srv.Addr()+"/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, resp); b != "ok" {
		t.Fatalf("first response %q", b)
	}
	// A request the server holds, cancelled: x/net resets it and counts
	// the stream until the server acknowledges the PING sent with the
	// reset, which it never does; the connection's one stream is taken.
	ctx, cancel := context.WithCancel(context.Background())
	done := goRoundTrip(c, newRequest(t, "GET", "http://"+srv.Addr()+"/held", nil).WithContext(ctx))
	<-held
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	waitFor(t, "the reset at the server", func() bool { _, resets := srv.PingsAndResets(); return resets == 1 })
	waitFor(t, "x/net to count the reset stream", func() bool { return !c.cc.CanTakeNewRequest() })

	// The cancelled request's release may have started a check (it asks
	// x/net's State): let it end before setting the hook.
	waitFor(t, "the checker goroutine to end", func() bool { return !c.judge.running.Load() })
	pinging, ping := make(chan struct{}), make(chan struct{})
	c.testHookPingIdle = func() { // read by the checker the next line starts
		close(pinging)
		<-ping
	}
	if c.ReserveStream() {
		t.Fatal("a stream on a full connection")
	}
	<-pinging // the checker found the connection full and idle

	entered := make(chan chan struct{})
	c.testHookReserving = func() { // read by A and B, started below
		proceed := make(chan struct{})
		entered <- proceed
		<-proceed
	}
	gotA, gotB := make(chan bool, 1), make(chan bool, 1)
	go func() { gotA <- c.ReserveStream() }()
	proceedA := <-entered
	go func() { gotB <- c.ReserveStream() }()
	proceedB := <-entered

	close(ping) // the checker pings, hears nothing and marks the connection dead
	waitFor(t, "the checker to mark the connection dead", c.isDead)
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		t.Fatal("closed with two slots counted busy")
	}

	close(proceedA)
	if <-gotA {
		t.Fatal("A: a stream on a dead connection")
	}
	close(proceedB)
	if <-gotB {
		t.Fatal("B: a stream on a dead connection")
	}
	c.testHookReserving = nil // A and B have returned

	wantClosedAtLastRefusal(t, c, nc)
}

// wantClosedAtLastRefusal checks, once the last slot of dead connection c
// was refused, that c closed it: at once (ReserveStream has returned), and
// its socket nc (closed by x/net, which may do it on a goroutine).
func wantClosedAtLastRefusal(t *testing.T, c *Conn, nc *closeSeen) {
	t.Helper()
	c.mu.Lock()
	busy, closed := c.busy, c.closed
	c.mu.Unlock()
	if busy != 0 || !closed {
		socket := "open"
		select {
		case <-nc.closed:
			socket = "closed"
		default:
		}
		t.Fatalf("dead connection after its last slot was refused: busy %d, closed %v (socket %s); want 0, true", busy, closed, socket)
	}
	select {
	case <-nc.closed:
	case <-time.After(20 * time.Second): // hang guard only
		t.Fatal("the socket of the dead connection was not closed")
	}
}

// TestRefusedReserveBeforeSettingsClosesDeadConn: the other refusal, of a
// second slot asked for before the server's SETTINGS are known on a
// connection with an OnStreamFree hook (peersettings.go), must close a
// dead connection whose last slot it was too. The death is Shutdown whose
// context ends while a request is in flight (x/net then stops new streams
// but closes nothing itself); that request is cancelled while the second
// reservation is being decided.
func TestRefusedReserveBeforeSettingsClosesDeadConn(t *testing.T) {
	xnetOnly(t) // a slot busy while ReserveStream decides; TestDeadConnClosedAtLastSlot for both
	held := make(chan struct{}, 1)
	srv := testpeer.StartH2(t, testpeer.H2Script{
		NoPingAck: true, // the SETTINGS probe is never answered
		OnHeaders: func(_, _ int, _ *http2.Framer, _ uint32) error {
			held <- struct{}{}
			return nil // never answered: the client cancels it
		},
	})
	nc := &closeSeen{Conn: dialH2(t, srv.Addr(), false), closed: make(chan struct{})}
	// The probe must not give up (that would settle the SETTINGS) before
	// the test ends; closing the connection ends it.
	c, err := NewClientConn(nc, Config{HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.OnStreamFree(func() {})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := goRoundTrip(c, newRequest(t, "GET", "http://"+srv.Addr()+"/held", nil).WithContext(ctx))
	<-held
	if c.peerLimitKnown() {
		t.Fatal("the server's SETTINGS are known without a PING ack or a response")
	}

	entered, proceed := make(chan struct{}), make(chan struct{})
	c.testHookReserving = func() { // read by the reservation started next
		close(entered)
		<-proceed
	}
	got := make(chan bool, 1)
	go func() { got <- c.ReserveStream() }()
	<-entered

	sctx, scancel := context.WithCancel(context.Background())
	scancel()
	if err := c.Shutdown(sctx); err == nil {
		t.Fatal("Shutdown with an ended context and a stream in flight returned nil")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	c.mu.Lock()
	busy, closed := c.busy, c.closed
	c.mu.Unlock()
	if busy != 1 || closed {
		t.Fatalf("with the reservation still deciding: busy %d, closed %v; want 1, false", busy, closed)
	}

	close(proceed)
	if <-got {
		t.Fatal("a stream on a dead connection")
	}
	c.testHookReserving = nil // the reservation has returned

	wantClosedAtLastRefusal(t, c, nc)
}
