//go:build linux

package dialer

import (
	"math"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// keepAliveState reads SO_KEEPALIVE and TCP_KEEPIDLE/KEEPINTVL/KEEPCNT.
func keepAliveState(t *testing.T, c net.Conn) [4]int {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var out [4]int
	var gerr error
	opts := [4][2]int{{unix.SOL_SOCKET, unix.SO_KEEPALIVE}, {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE}, {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL}, {unix.IPPROTO_TCP, unix.TCP_KEEPCNT}}
	if err := rc.Control(func(fd uintptr) {
		for i, o := range opts {
			if out[i], gerr = unix.GetsockoptInt(int(fd), o[0], o[1]); gerr != nil {
				return
			}
		}
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	return out
}

// TestKeepAliveAsNetDialer: the keep-alive configuration of a connection
// equals net.Dialer's for the same KeepAlive, and a value the kernel
// rejects (Linux caps TCP_KEEPIDLE at 32767s) leaves the dial succeeding
// with what was accepted, as net.Dialer does, instead of failing it. An idle
// time that does not fit the option at all (beyond 2^31-1 seconds, or one
// whose rounding up overflows) still turns SO_KEEPALIVE on, as net.Dialer
// does before its TCP_KEEPIDLE fails.
func TestKeepAliveAsNetDialer(t *testing.T) {
	srv := listen(t, "127.0.0.1:0")
	addr := netip.AddrPortFrom(v4, srv.port)
	for _, ka := range []time.Duration{0, 30 * time.Second, -1, 40000 * time.Second, (math.MaxInt32 + 1) * time.Second, math.MaxInt64} {
		nc, err := (&net.Dialer{KeepAlive: ka}).DialContext(t.Context(), "tcp", addr.String())
		if err != nil {
			t.Fatalf("KeepAlive %v: net.Dialer: %v", ka, err)
		}
		want := keepAliveState(t, nc)
		nc.Close()
		fc, err := (&Dialer{KeepAlive: ka}).DialAddrs(t.Context(), []netip.Addr{v4}, srv.port)
		if err != nil {
			t.Fatalf("KeepAlive %v: ferry dial failed where net.Dialer succeeds: %v", ka, err)
		}
		got := keepAliveState(t, fc.Conn)
		fc.Close()
		if got != want {
			t.Fatalf("KeepAlive %v: ferry [on idle intvl cnt] = %v, net.Dialer %v", ka, got, want)
		}
	}
}
