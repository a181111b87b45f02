//go:build linux

package dialer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptrace"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache"
	"github.com/ferryhttp/ferry/internal/sockopt"
	"golang.org/x/sys/unix"
)

// hookLog records httptrace connect hooks in the order they fire.
type hookLog struct {
	mu     sync.Mutex // guards events
	events []string
}

func (h *hookLog) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		ConnectStart: func(network, addr string) { h.add("start " + network + " " + addr) },
		ConnectDone: func(network, addr string, err error) {
			res := "ok"
			if err != nil {
				res = "err"
			}
			h.add("done " + network + " " + addr + " " + res)
		},
	}
}

func (h *hookLog) add(s string) {
	h.mu.Lock()
	h.events = append(h.events, s)
	h.mu.Unlock()
}

func (h *hookLog) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

func TestDialAddrsRace(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T) (uint16, *server)
		delay   time.Duration
		wantWin netip.Addr
		hooks   func(port uint16) []string
	}{
		{
			name:  "first refused falls to next at once",
			setup: refusedV4Port,
			// An hour: only the failure can start the second attempt.
			delay:   time.Hour,
			wantWin: v6,
			hooks: func(p uint16) []string {
				return []string{
					fmt.Sprintf("start tcp 127.0.0.1:%d", p),
					fmt.Sprintf("done tcp 127.0.0.1:%d err", p),
					fmt.Sprintf("start tcp [::1]:%d", p),
					fmt.Sprintf("done tcp [::1]:%d ok", p),
				}
			},
		},
		{
			name:    "first hangs, second wins after fallback delay",
			setup:   hangingDualStack,
			delay:   20 * time.Millisecond,
			wantWin: v6,
			hooks: func(p uint16) []string {
				return []string{
					fmt.Sprintf("start tcp 127.0.0.1:%d", p),
					fmt.Sprintf("start tcp [::1]:%d", p),
					fmt.Sprintf("done tcp [::1]:%d ok", p),
					fmt.Sprintf("done tcp 127.0.0.1:%d err", p), // cancelled loser, before return
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port, s6 := tt.setup(t)
			fdsBefore := openFDs(t)
			d := &Dialer{FallbackDelay: tt.delay, Timeout: time.Minute}
			var log hookLog
			ctx := httptrace.WithClientTrace(t.Context(), log.trace())
			c, err := d.DialAddrs(ctx, []netip.Addr{v4, v6}, port)
			if err != nil {
				t.Fatal(err)
			}
			if c.Remote != netip.AddrPortFrom(tt.wantWin, port) {
				t.Fatalf("winner %v, want %v", c.Remote, netip.AddrPortFrom(tt.wantWin, port))
			}
			if got := c.RemoteAddr().(*net.TCPAddr).AddrPort(); got != c.Remote {
				t.Fatalf("Remote %v disagrees with RemoteAddr %v", c.Remote, got)
			}
			if got := c.LocalAddr().(*net.TCPAddr).AddrPort(); got != c.Local {
				t.Fatalf("Local %v disagrees with LocalAddr %v", c.Local, got)
			}
			if want := tt.hooks(port); !slices.Equal(log.get(), want) {
				t.Fatalf("hooks\n got %q\nwant %q", log.get(), want)
			}
			<-s6.accepted
			c.Close()
			<-s6.closed
			waitFDs(t, fdsBefore)
		})
	}
}

// TestDialAddrsLosersClosed races two listening addresses with a tiny
// fallback delay so both attempts usually connect: every accepted
// connection but the winner's must be closed by the time DialAddrs returns
// (the server then sees EOF), and no fd stays open.
func TestDialAddrsLosersClosed(t *testing.T) {
	s4 := listen(t, "127.0.0.1:0")
	s6 := v6Listen(t, s4.port)
	fdsBefore := openFDs(t)
	d := &Dialer{FallbackDelay: time.Nanosecond}
	const rounds = 20
	winners := map[string]bool{} // the winning connections' local addresses
	for range rounds {
		c, err := d.DialAddrs(t.Context(), []netip.Addr{v4, v6}, s4.port)
		if err != nil {
			t.Fatal(err)
		}
		winners[c.LocalAddr().String()] = true
		c.Close()
	}
	if len(winners) != rounds {
		t.Fatalf("%d distinct winning connections for %d dials", len(winners), rounds)
	}
	// Every winner reached a server. Its accept may still be on its way
	// from the listener's queue to the server's goroutine, so wait for each
	// (counting the losers accepted meanwhile) rather than count at once.
	accepted := 0
	deadline := time.After(10 * time.Second)
	for pending := len(winners); pending > 0; {
		var a net.Addr
		select {
		case a = <-s4.accepted:
		case a = <-s6.accepted:
		case <-deadline:
			t.Fatalf("%d of %d winning connections never accepted", pending, len(winners))
		}
		accepted++
		if winners[a.String()] {
			pending--
		}
	}
	accepted += len(s4.accepted) + len(s6.accepted) // losers accepted so far
	// Every accepted connection (winners and connected losers) ends closed.
	for range accepted {
		select {
		case <-s4.closed:
		case <-s6.closed:
		case <-time.After(10 * time.Second):
			t.Fatal("an accepted connection was never closed by the dialer")
		}
	}
	waitFDs(t, fdsBefore)
}

func TestDialAddrsAllFail(t *testing.T) {
	port, s6 := refusedV4Port(t)
	s6.ln.Close() // now both refuse
	d := &Dialer{FallbackDelay: time.Hour}
	var log hookLog
	ctx := httptrace.WithClientTrace(t.Context(), log.trace())
	_, err := d.DialAddrs(ctx, []netip.Addr{v4, v6}, port)
	var oe *net.OpError
	if !errors.As(err, &oe) || !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("err = %v, want a *net.OpError wrapping ECONNREFUSED", err)
	}
	if want := fmt.Sprintf("127.0.0.1:%d", port); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name the first address %s", err, want)
	}
	if n := len(log.get()); n != 4 {
		t.Fatalf("hooks %q, want start+done for both addresses", log.get())
	}
}

func TestDialAddrsContextEnds(t *testing.T) {
	port := hangingV4(t)
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		// Cancel as soon as the attempt has started.
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{ConnectStart: func(string, string) { cancel() }})
		d := &Dialer{}
		_, err := d.DialAddrs(ctx, []netip.Addr{v4}, port)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || ne.Timeout() {
			t.Fatalf("err = %v: want a net.Error that is not a timeout", err)
		}
	})
	t.Run("dialer timeout", func(t *testing.T) {
		d := &Dialer{Timeout: 50 * time.Millisecond}
		_, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, port)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want a net.Error with Timeout() and DeadlineExceeded", err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d", port)) {
			t.Fatalf("error %q does not name the address", err)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var log hookLog
		_, err := (&Dialer{}).DialAddrs(httptrace.WithClientTrace(ctx, log.trace()), []netip.Addr{v4}, port)
		if !errors.Is(err, context.Canceled) || len(log.get()) != 0 {
			t.Fatalf("err = %v, hooks %q; want Canceled and no attempt", err, log.get())
		}
	})
}

func TestDialAddrsBadInput(t *testing.T) {
	d := &Dialer{}
	if _, err := d.DialAddrs(t.Context(), nil, 80); !errors.Is(err, ErrNoAddresses) {
		t.Fatalf("no addrs: %v", err)
	}
	// Port 0 is dialed, as net.Dialer does, and refused by the system with
	// the same error, through DialAddrs and Dial alike.
	_, want := (&net.Dialer{}).DialContext(t.Context(), "tcp", "127.0.0.1:0")
	if want == nil {
		t.Fatal("net.Dialer: port 0 connected")
	}
	var oe *net.OpError
	if _, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, 0); !errors.As(err, &oe) || oe.Addr.String() != "127.0.0.1:0" || err.Error() != want.Error() {
		t.Fatalf("DialAddrs port 0: %v, net.Dialer %v", err, want)
	}
	if _, err := d.Dial(t.Context(), "127.0.0.1:0"); err == nil || err.Error() != want.Error() {
		t.Fatalf("Dial port 0: %v, net.Dialer %v", err, want)
	}
	for _, hp := range []string{"no-port", "127.0.0.1:0", "127.0.0.1:99999", "127.0.0.1:no-such-service-xyz"} {
		if _, err := d.Dial(t.Context(), hp); err == nil {
			t.Fatalf("Dial(%q) succeeded", hp)
		}
	}
}

func TestSettingsAppliedOnce(t *testing.T) {
	s := listen(t, "127.0.0.1:0")
	tests := []struct {
		name      string
		keepAlive time.Duration
		settings  []sockopt.Setting
		read      map[sockopt.Option]int // getsockopt read-back
		syscalls  uint64
	}{
		{"go defaults", 0, nil, map[sockopt.Option]int{sockopt.KeepAlive: 1, sockopt.KeepIdle: 15, sockopt.KeepInterval: 15, sockopt.KeepCount: 9, sockopt.NoDelay: 1}, 4},
		{"transport 30s", 30 * time.Second, nil, map[sockopt.Option]int{sockopt.KeepAlive: 1, sockopt.KeepIdle: 30}, 4},
		{"keep-alive off", -1, nil, map[sockopt.Option]int{sockopt.KeepAlive: 0}, 0},
		{"settings", -1, []sockopt.Setting{{Option: sockopt.TOS, Value: 0x10}, {Option: sockopt.UserTimeout, Value: 5000}, {Option: sockopt.NoDelay, Value: 1}},
			map[sockopt.Option]int{sockopt.TOS: 0x10, sockopt.UserTimeout: 5000, sockopt.NoDelay: 1}, 2},
		{"setting overrides keep-alive", 30 * time.Second, []sockopt.Setting{{Option: sockopt.KeepIdle, Value: 60}},
			map[sockopt.Option]int{sockopt.KeepIdle: 60}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Dialer{KeepAlive: tt.keepAlive, Settings: tt.settings}
			c, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, s.port)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Guard == nil {
				t.Fatal("no Guard on a Linux connection")
			}
			if n := c.Guard.Syscalls(); n != tt.syscalls {
				t.Fatalf("dial made %d setsockopt calls, want %d", n, tt.syscalls)
			}
			for opt, want := range tt.read {
				if got, err := c.Guard.Read(opt); err != nil || got != want {
					t.Fatalf("%s = %d, %v; want %d", opt, got, err, want)
				}
			}
			// A later request re-applying the settings in effect costs
			// nothing.
			if len(tt.settings) == 0 {
				if err := c.Guard.Apply(d.keepAliveSettings()); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Guard.Apply(tt.settings); err != nil {
				t.Fatal(err)
			}
			if n := c.Guard.Syscalls(); n != tt.syscalls {
				t.Fatalf("re-applying made %d more setsockopt calls", n-tt.syscalls)
			}
		})
	}
	t.Run("rejected setting fails the dial", func(t *testing.T) {
		fds := openFDs(t)
		d := &Dialer{Settings: []sockopt.Setting{{Option: sockopt.KeepCount, Value: 0}}}
		c, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, s.port)
		if err == nil {
			c.Close() // or the server's cleanup waits for it and the test hangs
		}
		if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "TCP_KEEPCNT") {
			t.Fatalf("err = %v, want EINVAL naming TCP_KEEPCNT", err)
		}
		waitFDs(t, fds)
	})
}

func TestDialResolvesThroughCache(t *testing.T) {
	s4 := listen(t, "127.0.0.1:0")
	hostsHasLocalhost := false
	if addrs, err := net.DefaultResolver.LookupNetIP(t.Context(), "ip4", "localhost"); err == nil {
		for _, a := range addrs {
			hostsHasLocalhost = hostsHasLocalhost || a.Unmap() == v4
		}
	}
	if !hostsHasLocalhost {
		t.Skip("localhost does not resolve to 127.0.0.1 here")
	}
	cache := dnscache.New(dnscache.Config{})
	for _, d := range []*Dialer{{}, {DNS: cache}} {
		var dnsHooks []string
		var log hookLog
		tr := log.trace()
		tr.DNSStart = func(i httptrace.DNSStartInfo) { dnsHooks = append(dnsHooks, "start "+i.Host) }
		tr.DNSDone = func(i httptrace.DNSDoneInfo) { dnsHooks = append(dnsHooks, "done") }
		ctx := httptrace.WithClientTrace(t.Context(), tr)
		// Listening on 127.0.0.1 only: a ::1 answer for localhost is refused
		// and the race falls through to 127.0.0.1.
		c, err := d.Dial(ctx, fmt.Sprintf("localhost:%d", s4.port))
		if err != nil {
			t.Fatal(err)
		}
		if c.Remote.Addr() != v4 {
			t.Fatalf("connected to %v", c.Remote)
		}
		c.Close()
		if !slices.Equal(dnsHooks, []string{"start localhost", "done"}) {
			t.Fatalf("DNS hooks %q (cache=%v)", dnsHooks, d.DNS != nil)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	cache := dnscache.New(dnscache.Config{Resolver: &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp4", dead)
		},
	}})
	d := &Dialer{DNS: cache}
	_, err = d.Dial(t.Context(), "nowhere.ferry.test:80")
	var oe *net.OpError
	var de *net.DNSError
	if !errors.As(err, &oe) || !errors.As(err, &de) || de.Name != "nowhere.ferry.test" {
		t.Fatalf("err = %v, want *net.OpError wrapping a *net.DNSError naming the host", err)
	}
	if got, err := d.Resolve(t.Context(), "::ffff:127.0.0.1"); err != nil || len(got) != 1 || got[0] != v4 {
		t.Fatalf("Resolve literal = %v, %v", got, err)
	}
}

func TestInterleave(t *testing.T) {
	a := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	tests := []struct {
		in, want []netip.Addr
	}{
		{a("::1"), a("::1")},
		{a("::1", "::2", "1.1.1.1", "2.2.2.2"), a("::1", "1.1.1.1", "::2", "2.2.2.2")},
		{a("1.1.1.1", "2.2.2.2", "3.3.3.3", "::1"), a("1.1.1.1", "::1", "2.2.2.2", "3.3.3.3")},
		{a("::ffff:1.1.1.1", "::1"), a("1.1.1.1", "::1")},
	}
	for _, tt := range tests {
		if got := interleave(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("interleave(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestGuardFamilyFromDial checks the family the dialer hands the Guard by
// reading the traffic class with the option the kernel uses for that family.
func TestGuardFamilyFromDial(t *testing.T) {
	s4 := listen(t, "127.0.0.1:0")
	s6 := v6Listen(t, 0)
	tests := []struct {
		addr        netip.Addr
		port        uint16
		family      sockopt.Family
		level, name int
	}{
		{v4, s4.port, sockopt.FamilyIPv4, unix.IPPROTO_IP, unix.IP_TOS},
		{v6, s6.port, sockopt.FamilyIPv6, unix.IPPROTO_IPV6, unix.IPV6_TCLASS},
	}
	for _, tt := range tests {
		d := &Dialer{Settings: []sockopt.Setting{{Option: sockopt.TOS, Value: 0x20}}}
		c, err := d.DialAddrs(t.Context(), []netip.Addr{tt.addr}, tt.port)
		if err != nil {
			t.Fatal(err)
		}
		if c.Guard.Family() != tt.family {
			t.Fatalf("%v: family %v, want %v", tt.addr, c.Guard.Family(), tt.family)
		}
		raw, _ := c.Conn.(*net.TCPConn).SyscallConn()
		var v int
		var gerr error
		raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), tt.level, tt.name) })
		c.Close()
		if gerr != nil || v != 0x20 {
			t.Fatalf("%v: traffic class %#x, %v; want 0x20", tt.addr, v, gerr)
		}
	}
}
