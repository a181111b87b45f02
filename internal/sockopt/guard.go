package sockopt

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
)

// Family is the address family of the socket a Guard controls; it decides
// which traffic-class option TOS maps to.
type Family int

// Socket families as the Guard sees them.
const (
	// FamilyUnknown: the platform could not tell (non-Linux systems).
	FamilyUnknown Family = iota
	// FamilyIPv4 is an AF_INET socket.
	FamilyIPv4
	// FamilyIPv6 is an AF_INET6 socket carrying IPv6 traffic.
	FamilyIPv6
	// FamilyIPv4Mapped is an AF_INET6 socket connected over an IPv4-mapped
	// address (a dual-stack listener's accepted IPv4 connection): IPv4
	// packets, so TOS is IP_TOS.
	FamilyIPv4Mapped
	// FamilyOther is any other family (AF_UNIX, ...); TCP options fail on it
	// with the kernel's error.
	FamilyOther
)

// Setter makes one setsockopt call for opt on the socket fd. value has been
// validated and normalised. Setsockopt is the real one; tests and benchmarks
// pass a wrapper to NewGuardWithSetter to count or fail calls.
type Setter func(fd uintptr, family Family, opt Option, value int) error

// Guard applies socket options to one connection and remembers the value of
// each, skipping the syscall when asked to set the value already applied.
// The zero Guard is not usable; create one with NewGuard.
type Guard struct {
	raw      syscall.RawConn
	family   Family
	set      Setter
	syscalls atomic.Uint64

	// mu guards applied and serialises setsockopt calls, so that the record
	// always matches what the kernel holds. The calls under it are
	// non-blocking setsockopt syscalls only.
	mu      sync.Mutex
	applied [numOptions]int
}

// NewGuard returns a Guard for c, with every option "not applied". It fails
// if c cannot expose its socket (for example a closed connection) or its
// family cannot be read.
func NewGuard(c syscall.Conn) (*Guard, error) {
	return NewGuardWithSetter(c, Setsockopt)
}

// NewGuardWithSetter is NewGuard with the function that makes the syscall
// replaced; set must not be nil. It exists for tests and benchmarks that
// count or fail calls.
func NewGuardWithSetter(c syscall.Conn, set Setter) (*Guard, error) {
	return newGuard(c, set, FamilyUnknown)
}

// NewGuardFamily is NewGuard for a caller that already knows the socket's
// family (a dialer does, from the connection's addresses), saving the one
// or two syscalls NewGuard spends finding it out. family must not be
// FamilyUnknown.
func NewGuardFamily(c syscall.Conn, family Family) (*Guard, error) {
	if family == FamilyUnknown {
		return nil, errors.New("sockopt: NewGuardFamily with FamilyUnknown")
	}
	return newGuard(c, Setsockopt, family)
}

func newGuard(c syscall.Conn, set Setter, fam Family) (*Guard, error) {
	if c == nil {
		return nil, errors.New("sockopt: nil connection")
	}
	if set == nil {
		return nil, errors.New("sockopt: nil Setter")
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("sockopt: %w", err)
	}
	if fam == FamilyUnknown {
		fam, err = socketFamily(raw)
		if err != nil {
			return nil, fmt.Errorf("sockopt: reading socket family: %w", err)
		}
	}
	g := &Guard{raw: raw, family: fam, set: set}
	for i := range g.applied {
		g.applied[i] = notApplied
	}
	return g, nil
}

// Family reports the socket's family as detected by NewGuard.
func (g *Guard) Family() Family { return g.family }

// Set applies value to opt unless it is the value last applied (or assumed)
// through this Guard, and reports whether a syscall was made that succeeded.
// It returns ErrInvalidValue or ErrUnknownOption (wrapped) without a syscall
// for a bad request, and the kernel's error wrapped with the option's name
// when setsockopt fails; a failed Set leaves the record unchanged.
func (g *Guard) Set(opt Option, value int) (changed bool, err error) {
	if err := validate(opt, value); err != nil {
		return false, err
	}
	value = normalize(opt, value)
	g.mu.Lock()
	if g.applied[opt] == value {
		g.mu.Unlock()
		return false, nil
	}
	err = g.apply(opt, value)
	if err == nil {
		g.applied[opt] = value
	}
	g.mu.Unlock()
	if err != nil {
		return false, fmt.Errorf("sockopt: set %s=%d: %w", opt, value, err)
	}
	return true, nil
}

// apply makes the syscall; g.mu is held.
func (g *Guard) apply(opt Option, value int) error {
	var setErr error
	ctlErr := g.raw.Control(func(fd uintptr) {
		g.syscalls.Add(1)
		setErr = g.set(fd, g.family, opt, value)
	})
	if ctlErr != nil {
		return ctlErr
	}
	return setErr
}

// Get returns the value recorded for opt and whether one is recorded. It
// makes no syscall; use Read for the kernel's view.
func (g *Guard) Get(opt Option) (value int, known bool) {
	if opt < 0 || opt >= numOptions {
		return 0, false
	}
	g.mu.Lock()
	v := g.applied[opt]
	g.mu.Unlock()
	if v == notApplied {
		return 0, false
	}
	return v, true
}

// Assume records value for opt without a syscall, for a value known to be in
// effect already (Go sets TCP_NODELAY=1 on every TCP connection it creates).
// It validates like Set.
func (g *Guard) Assume(opt Option, value int) error {
	if err := validate(opt, value); err != nil {
		return err
	}
	g.mu.Lock()
	g.applied[opt] = normalize(opt, value)
	g.mu.Unlock()
	return nil
}

// Forget marks opt as not applied, so the next Set makes the syscall. Use it
// after changing the option behind the Guard's back.
func (g *Guard) Forget(opt Option) {
	if opt < 0 || opt >= numOptions {
		return
	}
	g.mu.Lock()
	g.applied[opt] = notApplied
	g.mu.Unlock()
}

// Apply sets each setting in order, as Set would, and stops at the first
// error, which names the option; settings before it stay applied and
// recorded. Settings already in effect cost nothing; the ones that change
// share one RawConn.Control call.
func (g *Guard) Apply(settings []Setting) error {
	for _, s := range settings {
		if err := validate(s.Option, s.Value); err != nil {
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	pending := false
	for _, s := range settings {
		if g.applied[s.Option] != normalize(s.Option, s.Value) {
			pending = true
			break
		}
	}
	if !pending {
		return nil
	}
	var setErr error
	ctlErr := g.raw.Control(func(fd uintptr) {
		for _, s := range settings {
			v := normalize(s.Option, s.Value)
			if g.applied[s.Option] == v {
				continue
			}
			g.syscalls.Add(1)
			if err := g.set(fd, g.family, s.Option, v); err != nil {
				setErr = fmt.Errorf("sockopt: set %s=%d: %w", s.Option, v, err)
				return
			}
			g.applied[s.Option] = v
		}
	})
	if ctlErr != nil {
		return fmt.Errorf("sockopt: apply: %w", ctlErr)
	}
	return setErr
}

// Syscalls returns how many setsockopt calls this Guard has made, failed
// ones included.
func (g *Guard) Syscalls() uint64 { return g.syscalls.Load() }

// Read asks the kernel for opt's current value with getsockopt (a syscall
// every time; the record is neither consulted nor changed). SO_RCVBUF and
// SO_SNDBUF read back doubled on Linux. Linger reads -1 when off.
func (g *Guard) Read(opt Option) (int, error) {
	if opt < 0 || opt >= numOptions {
		return 0, fmt.Errorf("%w: %d", ErrUnknownOption, int(opt))
	}
	var v int
	var getErr error
	ctlErr := g.raw.Control(func(fd uintptr) {
		v, getErr = getsockopt(fd, g.family, opt)
	})
	if ctlErr != nil {
		return 0, fmt.Errorf("sockopt: read %s: %w", opt, ctlErr)
	}
	if getErr != nil {
		return 0, fmt.Errorf("sockopt: read %s: %w", opt, getErr)
	}
	return v, nil
}

// ListenControl returns a function for net.ListenConfig.Control (or
// net.Dialer.Control) that applies settings to the socket before bind, which
// is when SO_REUSEPORT must be set. It makes one unguarded syscall per
// setting, since a fresh socket's state is unknown.
func ListenControl(settings []Setting) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		fam, err := socketFamily(c)
		if err != nil {
			return fmt.Errorf("sockopt: reading socket family: %w", err)
		}
		for _, s := range settings {
			if err := validate(s.Option, s.Value); err != nil {
				return err
			}
			v := normalize(s.Option, s.Value)
			var setErr error
			if err := c.Control(func(fd uintptr) { setErr = Setsockopt(fd, fam, s.Option, v) }); err != nil {
				return fmt.Errorf("sockopt: set %s=%d: %w", s.Option, v, err)
			}
			if setErr != nil {
				return fmt.Errorf("sockopt: set %s=%d: %w", s.Option, v, setErr)
			}
		}
		return nil
	}
}
