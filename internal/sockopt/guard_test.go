//go:build linux

package sockopt

import (
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestGuardSetAppliesOnceAndReadsBack(t *testing.T) {
	tests := []struct {
		network  string
		opt      Option
		value    int
		readBack int // what getsockopt returns after Set(value)
	}{
		{"tcp4", NoDelay, 0, 0},
		{"tcp4", NoDelay, 1, 1},
		{"tcp4", KeepAlive, 1, 1},
		{"tcp4", KeepIdle, 42, 42},
		{"tcp4", KeepInterval, 7, 7},
		{"tcp4", KeepCount, 3, 3},
		{"tcp4", UserTimeout, 0, 0},
		{"tcp4", UserTimeout, 1500, 1500},
		{"tcp4", RecvBuffer, 65536, 131072}, // Linux doubles buffer sizes
		{"tcp4", SendBuffer, 65536, 131072},
		{"tcp4", TOS, 0, 0}, // 0 is a real value: the first Set must reach the kernel
		{"tcp4", TOS, 0x10, 0x10},
		{"tcp4", Linger, -1, -1},
		{"tcp4", Linger, 0, 0},
		{"tcp4", Linger, 5, 5},
		{"tcp6", TOS, 0x20, 0x20}, // IPV6_TCLASS
		{"tcp6", NoDelay, 0, 0},
		{"tcp6", KeepIdle, 9, 9},
	}
	for _, tt := range tests {
		t.Run(tt.network+"/"+tt.opt.String(), func(t *testing.T) {
			c := loopbackConn(t, tt.network)
			cs := &countingSetter{}
			g, err := NewGuardWithSetter(c, cs.set)
			if err != nil {
				t.Fatal(err)
			}
			if _, known := g.Get(tt.opt); known {
				t.Fatalf("fresh guard claims %s is known", tt.opt)
			}
			changed, err := g.Set(tt.opt, tt.value)
			if err != nil || !changed {
				t.Fatalf("first Set(%s, %d) = %v, %v; want true, nil", tt.opt, tt.value, changed, err)
			}
			if cs.calls != 1 || g.Syscalls() != 1 {
				t.Fatalf("first Set made %d setter calls (guard counted %d), want 1", cs.calls, g.Syscalls())
			}
			got, err := g.Read(tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.readBack {
				t.Fatalf("getsockopt %s = %d after Set(%d), want %d", tt.opt, got, tt.value, tt.readBack)
			}
			for range 3 {
				changed, err = g.Set(tt.opt, tt.value)
				if err != nil || changed {
					t.Fatalf("repeat Set = %v, %v; want false, nil", changed, err)
				}
			}
			if cs.calls != 1 {
				t.Fatalf("repeated Set made %d setter calls, want 1 in total", cs.calls)
			}
			if v, known := g.Get(tt.opt); !known || v != tt.value {
				t.Fatalf("Get = %d, %v; want %d, true", v, known, tt.value)
			}
		})
	}
}

func TestGuardChangeMakesSyscall(t *testing.T) {
	c := loopbackConn(t, "tcp4")
	cs := &countingSetter{}
	g, err := NewGuardWithSetter(c, cs.set)
	if err != nil {
		t.Fatal(err)
	}
	seq := []struct {
		value     int
		wantCalls int
	}{{30, 1}, {30, 1}, {60, 2}, {60, 2}, {30, 3}}
	for i, s := range seq {
		if _, err := g.Set(KeepIdle, s.value); err != nil {
			t.Fatal(err)
		}
		if cs.calls != s.wantCalls {
			t.Fatalf("step %d: Set(KeepIdle, %d) -> %d calls, want %d", i, s.value, cs.calls, s.wantCalls)
		}
		if got, _ := g.Read(KeepIdle); got != s.value {
			t.Fatalf("step %d: kernel holds %d, want %d", i, got, s.value)
		}
	}
}

func TestGuardLingerNegativesAreOneValue(t *testing.T) {
	c := loopbackConn(t, "tcp4")
	cs := &countingSetter{}
	g, _ := NewGuardWithSetter(c, cs.set)
	for _, v := range []int{-1, -5, -1000} {
		if _, err := g.Set(Linger, v); err != nil {
			t.Fatal(err)
		}
	}
	if cs.calls != 1 {
		t.Fatalf("three 'linger off' values made %d calls, want 1", cs.calls)
	}
}

func TestGuardFailedSetRecordsNothing(t *testing.T) {
	t.Run("kernel rejects value", func(t *testing.T) {
		c := loopbackConn(t, "tcp4")
		g, err := NewGuard(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Set(KeepIdle, 20); err != nil {
			t.Fatal(err)
		}
		// TCP_KEEPIDLE must be >= 1: the kernel answers EINVAL.
		changed, err := g.Set(KeepIdle, 0)
		if err == nil || changed {
			t.Fatalf("Set(KeepIdle, 0) = %v, %v; want an error", changed, err)
		}
		if !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("error %v does not wrap EINVAL", err)
		}
		if !strings.Contains(err.Error(), "TCP_KEEPIDLE") {
			t.Fatalf("error %q does not name the option", err)
		}
		if v, known := g.Get(KeepIdle); !known || v != 20 {
			t.Fatalf("after failed Set, Get = %d, %v; want the previous 20, true", v, known)
		}
		if got, _ := g.Read(KeepIdle); got != 20 {
			t.Fatalf("kernel holds %d, want 20", got)
		}
	})
	t.Run("closed socket", func(t *testing.T) {
		c := loopbackConn(t, "tcp4")
		g, err := NewGuard(c)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if _, err := g.Set(TOS, 0); err == nil {
			t.Fatal("Set on a closed connection succeeded")
		} else if !strings.Contains(err.Error(), "IP_TOS") {
			t.Fatalf("error %q does not name the option", err)
		}
		if _, known := g.Get(TOS); known {
			t.Fatal("failed Set recorded a value")
		}
		if _, err := NewGuard(c); err == nil {
			t.Fatal("NewGuard on a closed connection succeeded")
		}
	})
	t.Run("setter error then retry", func(t *testing.T) {
		c := loopbackConn(t, "tcp4")
		cs := &countingSetter{fail: unix.EPERM}
		g, _ := NewGuardWithSetter(c, cs.set)
		if _, err := g.Set(TOS, 0x10); !errors.Is(err, unix.EPERM) {
			t.Fatalf("err = %v, want EPERM", err)
		}
		cs.fail = nil
		if changed, err := g.Set(TOS, 0x10); err != nil || !changed {
			t.Fatalf("retry Set = %v, %v; want true, nil", changed, err)
		}
		if cs.calls != 2 {
			t.Fatalf("calls = %d, want 2 (a failed set must not be remembered)", cs.calls)
		}
	})
}

func TestGuardRejectsBadInputWithoutSyscall(t *testing.T) {
	c := loopbackConn(t, "tcp4")
	cs := &countingSetter{}
	g, _ := NewGuardWithSetter(c, cs.set)
	tests := []struct {
		opt   Option
		value int
		want  error
	}{
		{NoDelay, 2, ErrInvalidValue},
		{KeepAlive, -1, ErrInvalidValue},
		{TOS, 256, ErrInvalidValue},
		{TOS, -1, ErrInvalidValue},
		{KeepIdle, -1, ErrInvalidValue},
		{RecvBuffer, 1 << 40, ErrInvalidValue},
		{Linger, 1 << 40, ErrInvalidValue},
		{Option(-1), 0, ErrUnknownOption},
		{numOptions, 0, ErrUnknownOption},
		{NoDelay, notApplied, ErrInvalidValue},
	}
	for _, tt := range tests {
		if _, err := g.Set(tt.opt, tt.value); !errors.Is(err, tt.want) {
			t.Errorf("Set(%v, %d) err = %v, want %v", tt.opt, tt.value, err, tt.want)
		}
		if err := g.Assume(tt.opt, tt.value); !errors.Is(err, tt.want) {
			t.Errorf("Assume(%v, %d) err = %v, want %v", tt.opt, tt.value, err, tt.want)
		}
		// Validate is Set's check: the same error, word for word.
		_, setErr := g.Set(tt.opt, tt.value)
		if err := Validate(tt.opt, tt.value); !errors.Is(err, tt.want) || err.Error() != setErr.Error() {
			t.Errorf("Validate(%v, %d) err = %v, want %v (Set's error)", tt.opt, tt.value, err, setErr)
		}
	}
	for _, s := range []Setting{{NoDelay, 0}, {TOS, 255}, {Linger, -5}, {UserTimeout, 0}} {
		if err := Validate(s.Option, s.Value); err != nil {
			t.Errorf("Validate(%v, %d) = %v, want nil", s.Option, s.Value, err)
		}
	}
	if cs.calls != 0 {
		t.Fatalf("invalid input made %d syscalls", cs.calls)
	}
	if _, err := NewGuard(nil); err == nil {
		t.Fatal("NewGuard(nil) succeeded")
	}
	if _, err := NewGuardWithSetter(c, nil); err == nil {
		t.Fatal("NewGuardWithSetter(c, nil) succeeded")
	}
}

func TestGuardAssumeAndForget(t *testing.T) {
	c := loopbackConn(t, "tcp4")
	cs := &countingSetter{}
	g, _ := NewGuardWithSetter(c, cs.set)
	// Go turns TCP_NODELAY on for every TCP connection: assume it.
	if got, _ := g.Read(NoDelay); got != 1 {
		t.Fatalf("Go left TCP_NODELAY at %d", got)
	}
	if err := g.Assume(NoDelay, 1); err != nil {
		t.Fatal(err)
	}
	if changed, _ := g.Set(NoDelay, 1); changed || cs.calls != 0 {
		t.Fatalf("Set of an assumed value made a syscall (calls=%d)", cs.calls)
	}
	g.Forget(NoDelay)
	if changed, _ := g.Set(NoDelay, 1); !changed || cs.calls != 1 {
		t.Fatalf("Set after Forget made %d calls, want 1", cs.calls)
	}
}

func TestGuardApply(t *testing.T) {
	c := loopbackConn(t, "tcp4")
	cs := &countingSetter{}
	g, _ := NewGuardWithSetter(c, cs.set)
	settings := []Setting{{KeepAlive, 1}, {KeepIdle, 30}, {KeepInterval, 15}, {KeepCount, 9}, {TOS, 0}}
	for round := range 3 {
		if err := g.Apply(settings); err != nil {
			t.Fatal(err)
		}
		if cs.calls != len(settings) {
			t.Fatalf("round %d: %d calls, want %d", round, cs.calls, len(settings))
		}
	}
	err := g.Apply([]Setting{{KeepIdle, 31}, {KeepCount, 0}, {KeepInterval, 16}})
	if err == nil || !strings.Contains(err.Error(), "TCP_KEEPCNT") {
		t.Fatalf("Apply err = %v, want one naming TCP_KEEPCNT", err)
	}
	if v, _ := g.Get(KeepInterval); v != 15 {
		t.Fatalf("Apply went on after an error: KeepInterval recorded %d", v)
	}
}

func TestGuardConcurrentSet(t *testing.T) {
	c := loopbackConn(t, "tcp4")
	g, _ := NewGuard(c)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := g.Set(TOS, 0x08); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := g.Syscalls(); n != 1 {
		t.Fatalf("800 concurrent Sets of one value made %d syscalls, want 1", n)
	}
}

func TestGuardFamily(t *testing.T) {
	for _, tt := range []struct {
		network string
		want    Family
	}{{"tcp4", FamilyIPv4}, {"tcp6", FamilyIPv6}} {
		t.Run(tt.network, func(t *testing.T) {
			g, err := NewGuard(loopbackConn(t, tt.network))
			if err != nil {
				t.Fatal(err)
			}
			if g.Family() != tt.want {
				t.Fatalf("Family = %v, want %v", g.Family(), tt.want)
			}
		})
	}
}

// TestGuardIPv4MappedUsesIPTOS accepts an IPv4 connection on a dual-stack
// AF_INET6 socket bound to ::ffff:127.0.0.1: its packets are IPv4, so TOS
// must be IP_TOS rather than IPV6_TCLASS.
func TestGuardIPv4MappedUsesIPTOS(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no AF_INET6 sockets: %v", err)
	}
	lnFile := newFile(fd, "mapped-listener")
	defer lnFile.Close()
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
		t.Skipf("cannot clear IPV6_V6ONLY: %v", err)
	}
	sa := &unix.SockaddrInet6{Addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}}
	if err := unix.Bind(fd, sa); err != nil {
		t.Skipf("cannot bind ::ffff:127.0.0.1: %v", err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		t.Fatal(err)
	}
	ln, err := net.FileListener(lnFile)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().(*net.TCPAddr).AddrPort().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	g, err := NewGuard(srv.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	if g.Family() != FamilyIPv4Mapped {
		t.Fatalf("Family = %v, want FamilyIPv4Mapped", g.Family())
	}
	if _, err := g.Set(TOS, 0x28); err != nil {
		t.Fatal(err)
	}
	raw, _ := srv.(*net.TCPConn).SyscallConn()
	var tos int
	var getErr error
	raw.Control(func(fd uintptr) { tos, getErr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS) })
	if getErr != nil || tos != 0x28 {
		t.Fatalf("IP_TOS = %#x, %v; want 0x28", tos, getErr)
	}
}

func TestListenControlReusePort(t *testing.T) {
	lc := net.ListenConfig{Control: ListenControl([]Setting{{ReusePort, 1}})}
	ln1, err := lc.Listen(t.Context(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln1.Close()
	ln2, err := lc.Listen(t.Context(), "tcp4", ln1.Addr().String())
	if err != nil {
		t.Fatalf("second listener on the same port with SO_REUSEPORT: %v", err)
	}
	defer ln2.Close()
	g, err := NewGuard(ln1.(*net.TCPListener))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := g.Read(ReusePort); err != nil || v != 1 {
		t.Fatalf("SO_REUSEPORT = %d, %v; want 1", v, err)
	}
	bad := net.ListenConfig{Control: ListenControl([]Setting{{ReusePort, 3}})}
	if ln, err := bad.Listen(t.Context(), "tcp4", "127.0.0.1:0"); !errors.Is(err, ErrInvalidValue) {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("invalid ReusePort value: err = %v", err)
	}
}

func TestOptionString(t *testing.T) {
	if NoDelay.String() != "TCP_NODELAY" || Option(99).String() != "Option(99)" {
		t.Fatalf("String: %q %q", NoDelay.String(), Option(99).String())
	}
}
