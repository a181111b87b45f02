package testpeer

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Relays stand between a client and a server on loopback, so that a test
// can make the path between them go silent: the client's host vanished,
// a NAT binding was lost, the network died without a word. Neither end
// sees a close.

// Relay forwards TCP connections from its loopback listener (Addr) to a
// target, each over a connection of its own, until Silence.
type Relay struct {
	ln      net.Listener
	target  string
	silent  atomic.Bool
	wg      sync.WaitGroup // the accept loop and the pipes
	closing sync.Once

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

// StartRelay starts a Relay to target; the test's cleanup closes it with
// every socket and waits for its goroutines.
func StartRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{ln: ln, target: target}
	r.wg.Go(r.accept)
	t.Cleanup(func() {
		r.Silence()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
	})
	return r
}

// Addr is where clients connect.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) accept() {
	for {
		front, err := r.ln.Accept()
		if err != nil {
			return
		}
		back, err := net.Dial("tcp", r.target)
		if err != nil {
			front.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, front, back)
		r.mu.Unlock()
		r.wg.Go(func() { r.pipe(back, front) })
		r.wg.Go(func() { r.pipe(front, back) })
	}
}

// pipe copies src to dst until src fails or the relay goes silent. The
// end of src (its peer closed) is passed on as the end of dst's writing
// side, unless the relay is silent.
func (r *Relay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if r.silent.Load() {
			return
		}
		if err != nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && errors.Is(err, io.EOF) {
				cw.CloseWrite()
			}
			return
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// Silence stops the relay for good: it accepts no more connections and
// forwards nothing either way, nor reads anything, but keeps every socket
// open, so that each end sees the other go silent without closing. It
// returns once the relay's goroutines ended.
func (r *Relay) Silence() {
	r.closing.Do(func() {
		r.silent.Store(true)
		r.ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.SetReadDeadline(time.Now()) // wakes the pipes; nothing is closed
		}
		r.mu.Unlock()
	})
	r.wg.Wait()
}

// UDPRelay forwards the datagrams of one client between its loopback
// socket (Addr) and a target, until Silence.
type UDPRelay struct {
	front    *net.UDPConn // the client's side
	back     *net.UDPConn // connected to the target
	client   atomic.Pointer[net.UDPAddr]
	up, down func(b []byte, send func([]byte))
	silent   atomic.Bool
	wg       sync.WaitGroup
	closing  sync.Once
}

// StartUDPRelay starts a UDPRelay to target; the test's cleanup closes its
// sockets and waits for its goroutines.
func StartUDPRelay(t testing.TB, target string) *UDPRelay {
	return StartUDPRelayVia(t, target, nil, nil)
}

// StartUDPRelayVia is StartUDPRelay with datagrams going through up (from
// the client) and down (from the target), when not nil, instead of
// straight on: each gets a copy of the datagram and the function that
// delivers it, to call at once, later (from any goroutine) or never.
func StartUDPRelayVia(t testing.TB, target string, up, down func(b []byte, send func([]byte))) *UDPRelay {
	t.Helper()
	to, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.DialUDP("udp", nil, to)
	if err != nil {
		front.Close()
		t.Fatal(err)
	}
	r := &UDPRelay{front: front, back: back, up: up, down: down}
	r.wg.Go(r.pumpUp)
	r.wg.Go(r.pumpDown)
	t.Cleanup(r.Close)
	return r
}

// Addr is where the client sends.
func (r *UDPRelay) Addr() string { return r.front.LocalAddr().String() }

// Silence makes the relay drop every datagram, both ways, from now on.
func (r *UDPRelay) Silence() { r.silent.Store(true) }

// Close closes the relay's sockets and waits for its goroutines; the
// test's cleanup calls it, and a test may call it first (a function given
// to StartUDPRelayVia is not called once Close returned).
func (r *UDPRelay) Close() {
	r.closing.Do(func() {
		r.front.Close()
		r.back.Close()
	})
	r.wg.Wait()
}

func (r *UDPRelay) toTarget(b []byte) {
	if !r.silent.Load() {
		r.back.Write(b)
	}
}

func (r *UDPRelay) toClient(b []byte) {
	if to := r.client.Load(); to != nil && !r.silent.Load() {
		r.front.WriteToUDP(b, to)
	}
}

// pumpUp reads the client's datagrams until the front socket is closed,
// noting the client's address.
func (r *UDPRelay) pumpUp() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.front.ReadFromUDP(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err == nil {
			r.client.Store(from)
			r.forward(buf[:n], r.up, r.toTarget)
		}
	}
}

// pumpDown reads the target's datagrams until the back socket is closed;
// a refusal (ICMP, while the target is not listening yet) is skipped.
func (r *UDPRelay) pumpDown() {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.back.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err == nil {
			r.forward(buf[:n], r.down, r.toClient)
		}
	}
}

// forward sends b on, through via when it is set (with a copy: the pump's
// buffer is reused).
func (r *UDPRelay) forward(b []byte, via func([]byte, func([]byte)), send func([]byte)) {
	if via == nil {
		send(b)
		return
	}
	via(append([]byte(nil), b...), send)
}
