package sockio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pair is one loopback TCP connection: client is the dialled end (wrapped
// or not, per the test's side), peer the accepted end, a plain TCPConn.
type pair struct {
	client net.Conn
	peer   *net.TCPConn
}

// sides are the two implementations each behaviour is compared across:
// the plain *net.TCPConn (the control) and the same socket wrapped.
var sides = []string{"tcpconn", "sockio"}

func newPair(t *testing.T, side string) pair {
	t.Helper()
	if side == "sockio" && !Enabled() {
		t.Skip("raw socket I/O is off on this platform or by FERRY_RAWIO=off")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p := <-accepted
	if p == nil {
		c.Close()
		t.Fatal("accept failed")
	}
	pr := pair{client: c, peer: p.(*net.TCPConn)}
	if side == "sockio" {
		pr.client = Wrap(c)
		if _, ok := pr.client.(*Conn); !ok {
			t.Fatalf("Wrap(%T) = %T, want *sockio.Conn", c, pr.client)
		}
	}
	t.Cleanup(func() {
		pr.client.Close()
		pr.peer.Close()
	})
	return pr
}

// errShape is an error's text with the pair's addresses replaced, so the
// two sides' errors (on different ports) compare equal when they match.
func errShape(p pair, err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	s = strings.ReplaceAll(s, p.client.LocalAddr().String(), "LOCAL")
	s = strings.ReplaceAll(s, p.client.RemoteAddr().String(), "REMOTE")
	return s
}

// compareSides runs f on a fresh pair per side and requires the same
// outcome from both (f's result string), and a non-empty one.
func compareSides(t *testing.T, f func(t *testing.T, p pair) string) {
	t.Helper()
	got := map[string]string{}
	for _, side := range sides {
		t.Run(side, func(t *testing.T) {
			got[side] = f(t, newPair(t, side))
		})
	}
	if len(got) < 2 {
		return // the wrapped side skipped
	}
	if got["tcpconn"] == "" || got["tcpconn"] != got["sockio"] {
		t.Fatalf("outcomes differ:\n tcpconn: %q\n sockio:  %q", got["tcpconn"], got["sockio"])
	}
}

func TestBytesBothWaysMatchWrittenBytes(t *testing.T) {
	const size = 8 << 20
	for _, side := range sides {
		t.Run(side, func(t *testing.T) {
			p := newPair(t, side)
			up := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			down := bytes.Repeat([]byte("fedcba9876543210"), size/16)
			var wg sync.WaitGroup
			var peerGot []byte
			var peerErr, peerWriteErr error
			wg.Add(2)
			go func() { // the peer reads what the client writes
				defer wg.Done()
				peerGot, peerErr = io.ReadAll(p.peer)
			}()
			go func() { // and writes its own stream meanwhile
				defer wg.Done()
				_, peerWriteErr = p.peer.Write(down)
				p.peer.CloseWrite()
			}()
			n, err := p.client.Write(up)
			if err != nil || n != len(up) {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(up))
			}
			p.client.(interface{ CloseWrite() error }).CloseWrite()
			got, err := io.ReadAll(p.client)
			wg.Wait()
			if err != nil || !bytes.Equal(got, down) {
				t.Fatalf("client read %d bytes (err %v), want the peer's %d", len(got), err, len(down))
			}
			if peerErr != nil || peerWriteErr != nil || !bytes.Equal(peerGot, up) {
				t.Fatalf("peer read %d bytes (err %v, write err %v), want the client's %d", len(peerGot), peerErr, peerWriteErr, len(up))
			}
		})
	}
}

func TestReadAtPeerCloseIsEOF(t *testing.T) {
	compareSides(t, func(t *testing.T, p pair) string {
		p.peer.Write([]byte("last"))
		p.peer.Close()
		buf := make([]byte, 16)
		n, err := io.ReadFull(p.client, buf[:4])
		if n != 4 || err != nil {
			t.Fatalf("ReadFull = %d, %v", n, err)
		}
		n, err = p.client.Read(buf)
		if err != io.EOF {
			t.Fatalf("Read at close = %d, %v; want io.EOF itself", n, err)
		}
		return strings.Join([]string{string(buf[:4]), errShape(p, err)}, " ")
	})
}

func TestZeroLengthCallsDoNothing(t *testing.T) {
	compareSides(t, func(t *testing.T, p pair) string {
		rn, rerr := p.client.Read(nil)
		wn, werr := p.client.Write(nil)
		return errShape(p, rerr) + " " + errShape(p, werr) + " " + string(rune('0'+rn+wn))
	})
}

func TestReadDeadlineErrorMatchesTCPConn(t *testing.T) {
	compareSides(t, func(t *testing.T, p pair) string {
		p.client.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := p.client.Read(make([]byte, 8))
		var ne net.Error
		if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Read past deadline = %d, %v; want a timeout", n, err)
		}
		return errShape(p, err)
	})
}

func TestWriteDeadlineReportsWhatWasWritten(t *testing.T) {
	compareSides(t, func(t *testing.T, p pair) string {
		// The peer reads nothing, so the socket buffers fill and the write
		// waits until its deadline.
		p.client.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		big := make([]byte, 64<<20)
		n, err := p.client.Write(big)
		if n <= 0 || n >= len(big) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Write past deadline = %d, %v; want part of it and a timeout", n, err)
		}
		// What the write reported as written is what the peer gets.
		p.client.Close()
		got, _ := io.Copy(io.Discard, p.peer)
		if got != int64(n) {
			t.Fatalf("peer received %d bytes, Write reported %d", got, n)
		}
		return errShape(p, err)
	})
}

func TestCloseDuringReadIsErrClosed(t *testing.T) {
	compareSides(t, func(t *testing.T, p pair) string {
		done := make(chan error, 1)
		go func() {
			_, err := p.client.Read(make([]byte, 8))
			done <- err
		}()
		// The read waits for data that never comes; Close must end it.
		time.Sleep(10 * time.Millisecond)
		p.client.Close()
		err := <-done
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read ended by Close = %v; want net.ErrClosed", err)
		}
		_, err2 := p.client.Write([]byte("x"))
		if !errors.Is(err2, net.ErrClosed) {
			t.Fatalf("Write after Close = %v; want net.ErrClosed", err2)
		}
		return errShape(p, err) + " | " + errShape(p, err2)
	})
}

func TestPeerResetErrorsMatchTCPConn(t *testing.T) {
	compareSides(t, func(t *testing.T, p pair) string {
		p.peer.SetLinger(0) // close sends RST
		p.peer.Close()
		_, rerr := p.client.Read(make([]byte, 8))
		if !errors.Is(rerr, syscall.ECONNRESET) {
			t.Fatalf("Read after the peer's reset = %v; want ECONNRESET", rerr)
		}
		_, werr := p.client.Write([]byte("after reset"))
		if !errors.Is(werr, syscall.EPIPE) {
			t.Fatalf("Write after the reset = %v; want EPIPE", werr)
		}
		var se *os.SyscallError
		if !errors.As(rerr, &se) || !errors.As(werr, &se) {
			t.Fatalf("errors %v, %v do not hold an *os.SyscallError", rerr, werr)
		}
		return errShape(p, rerr) + " | " + errShape(p, werr)
	})
}

func TestConcurrentReadsShareTheStream(t *testing.T) {
	for _, side := range sides {
		t.Run(side, func(t *testing.T) {
			p := newPair(t, side)
			const total = 4 << 20
			var mu sync.Mutex
			got := 0
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]byte, 1000)
					for {
						n, err := p.client.Read(buf)
						mu.Lock()
						got += n
						mu.Unlock()
						if err != nil {
							return
						}
					}
				}()
			}
			if _, err := p.peer.Write(make([]byte, total)); err != nil {
				t.Fatal(err)
			}
			p.peer.Close()
			wg.Wait()
			if got != total {
				t.Fatalf("readers got %d bytes, want %d", got, total)
			}
		})
	}
}

func TestWrapKeepsTheTCPConnReachable(t *testing.T) {
	p := newPair(t, "sockio")
	c := p.client.(*Conn)
	tc, ok := c.NetConn().(*net.TCPConn)
	if !ok || tc != c.TCPConn {
		t.Fatalf("NetConn() = %T, want the wrapped *net.TCPConn", c.NetConn())
	}
	var sc syscall.Conn = c // socket options reach the socket through it
	if _, err := sc.SyscallConn(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetNoDelay(true); err != nil {
		t.Fatal(err)
	}
}

func TestWrapLeavesOtherConnsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Wrap(a); got != a {
		t.Fatalf("Wrap(net.Pipe conn) = %T, want it unchanged", got)
	}
	p := newPair(t, "tcpconn")
	was := SetEnabled(false)
	defer SetEnabled(was)
	if got := Wrap(p.client); got != p.client {
		t.Fatalf("Wrap with raw I/O off = %T, want the TCPConn unchanged", got)
	}
}

func TestReadAndWriteAllocateNothing(t *testing.T) {
	p := newPair(t, "sockio")
	go io.Copy(p.peer, p.peer) // echo
	msg := []byte("ping")
	buf := make([]byte, 4)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := p.client.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(p.client, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a Write and a Read allocate %.1f times, want 0", allocs)
	}
}
