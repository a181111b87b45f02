package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// udpGate relays datagrams between one client and a UDP server, holding
// the client's datagrams back until opened: a QUIC handshake through it
// stalls until the test lets it go on.
type udpGate struct {
	pc net.PacketConn // where the client sends
	up *net.UDPConn   // connected to the server

	mu     sync.Mutex // guards open, held, client
	open   bool
	held   [][]byte
	client net.Addr
}

// startUDPGate relays to 127.0.0.1:serverPort and returns the gate, whose
// port the client is to use.
func startUDPGate(t *testing.T, serverPort int) *udpGate {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: serverPort})
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	g := &udpGate{pc: pc, up: up}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			g.mu.Lock()
			g.client = from
			if !g.open {
				g.held = append(g.held, append([]byte(nil), buf[:n]...))
				g.mu.Unlock()
				continue
			}
			g.mu.Unlock()
			up.Write(buf[:n])
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, err := up.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ICMP refusals while the server starts
			}
			g.mu.Lock()
			to := g.client
			g.mu.Unlock()
			if to != nil {
				pc.WriteTo(buf[:n], to)
			}
		}
	}()
	t.Cleanup(func() { pc.Close(); up.Close(); wg.Wait() })
	return g
}

func (g *udpGate) port() int { return g.pc.LocalAddr().(*net.UDPAddr).Port }

// received reports whether a client datagram arrived.
func (g *udpGate) received() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.client != nil
}

// release lets the held datagrams and every later one through.
func (g *udpGate) release() {
	g.mu.Lock()
	g.open = true
	held := g.held
	g.held = nil
	g.mu.Unlock()
	for _, p := range held {
		g.up.Write(p)
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
