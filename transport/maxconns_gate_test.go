package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// udpGate is a relay to a UDP server that holds the client's datagrams
// back until released: a QUIC handshake through it stalls until the test
// lets it go on.
type udpGate struct {
	*testpeer.UDPRelay

	mu   sync.Mutex // guards open, held, send and seen
	open bool
	held [][]byte
	send func([]byte) // delivers to the server
	seen bool         // a client datagram arrived
}

// startUDPGate relays to 127.0.0.1:serverPort and returns the gate, whose
// port the client is to use.
func startUDPGate(t *testing.T, serverPort int) *udpGate {
	g := &udpGate{}
	g.UDPRelay = testpeer.StartUDPRelayVia(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(serverPort)), g.take, nil)
	return g
}

func (g *udpGate) take(b []byte, send func([]byte)) {
	g.mu.Lock()
	g.seen = true
	if !g.open {
		g.held, g.send = append(g.held, b), send
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	send(b)
}

func (g *udpGate) port() int {
	_, port, _ := net.SplitHostPort(g.Addr())
	n, _ := strconv.Atoi(port)
	return n
}

// received reports whether a client datagram arrived.
func (g *udpGate) received() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen
}

// release lets the held datagrams and every later one through.
func (g *udpGate) release() {
	g.mu.Lock()
	g.open = true
	held, send := g.held, g.send
	g.held = nil
	g.mu.Unlock()
	for _, p := range held {
		send(p)
	}
}

// TestMaxConnsDialEndsWithTCPWaiter: with a limit of 1, a QUIC dial holds
// the only slot while its handshake stalls; the HTTP/3 request that
// started it is cancelled (it returns at once), and a request that must go
// over TCP (an Upgrade request) queues for the slot. When the handshake
// completes nobody is on the new QUIC connection: it gives its slot to
// the TCP request at once instead of leaving it waiting for ever.
func TestMaxConnsDialEndsWithTCPWaiter(t *testing.T) {
	h3port, _ := startH3(t, &protoHandler{}, nil)
	gate := startUDPGate(t, h3port)
	h := &protoHandler{}
	h.setAltSvc(altValue("", gate.port()))
	u := startTLSProto(t, h, false)
	tr := newH3Transport(t, func(tr *Transport) {
		tr.MaxConnsPerHost = 1
		tr.h3.headStart = time.Nanosecond
	})
	s := startConnSampler(t, tr, portOf(t, u))
	if p, err := getProto(context.Background(), tr, u); err != nil || p != "HTTP/1.1" {
		t.Fatalf("first request: %s, %v", p, err)
	}
	s.sample() // its connection is idle in the pool

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	errA := make(chan error, 1)
	go func() {
		_, err := getProto(ctxA, tr, u)
		errA <- err
	}()
	eventually(t, "the QUIC handshake to reach the gate", gate.received)
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled HTTP/3 request: %v, want context.Canceled", err)
	}

	key := connKeyOf(t, tr, u)
	errB := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "ferry-test")
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			if resp.Proto != "HTTP/1.1" {
				err = errors.New("Upgrade request over " + resp.Proto)
			}
		}
		errB <- err
	}()
	eventually(t, "the TCP request queued", func() bool { return tr.pool.Waiting(key) == 1 })
	gate.release()
	if err := <-errB; err != nil {
		t.Fatalf("TCP request queued behind the QUIC dial: %v", err)
	}
	s.check(t, 1)
	if n := tr.h3.quic.held.Load(); n != 0 {
		t.Fatalf("QUIC holds %d slots after giving its connection up", n)
	}
}
