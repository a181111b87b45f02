package sockopt

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// level and name of each integer option; TOS and Linger are special-cased.
var intOptions = [numOptions]struct{ level, name int }{
	NoDelay:      {unix.IPPROTO_TCP, unix.TCP_NODELAY},
	KeepAlive:    {unix.SOL_SOCKET, unix.SO_KEEPALIVE},
	KeepIdle:     {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
	KeepInterval: {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
	KeepCount:    {unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
	UserTimeout:  {unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
	RecvBuffer:   {unix.SOL_SOCKET, unix.SO_RCVBUF},
	SendBuffer:   {unix.SOL_SOCKET, unix.SO_SNDBUF},
	ReusePort:    {unix.SOL_SOCKET, unix.SO_REUSEPORT},
}

func tosLevelName(family Family) (level, name int) {
	if family == FamilyIPv6 {
		return unix.IPPROTO_IPV6, unix.IPV6_TCLASS
	}
	return unix.IPPROTO_IP, unix.IP_TOS
}

// Setsockopt makes one unguarded setsockopt call on fd: what a Guard does
// when the value changes. It is exported as the Setter tests and benchmarks
// wrap. Errors are *os.SyscallError wrapping the errno.
func Setsockopt(fd uintptr, family Family, opt Option, value int) error {
	s := int(fd)
	var err error
	switch opt {
	case TOS:
		level, name := tosLevelName(family)
		err = unix.SetsockoptInt(s, level, name, value)
	case Linger:
		l := unix.Linger{}
		if value >= 0 {
			l.Onoff, l.Linger = 1, int32(value)
		}
		err = unix.SetsockoptLinger(s, unix.SOL_SOCKET, unix.SO_LINGER, &l)
	default:
		if opt < 0 || opt >= numOptions {
			return fmt.Errorf("%w: %d", ErrUnknownOption, int(opt))
		}
		o := intOptions[opt]
		err = unix.SetsockoptInt(s, o.level, o.name, value)
	}
	if err != nil {
		return os.NewSyscallError("setsockopt", err)
	}
	return nil
}

func getsockopt(fd uintptr, family Family, opt Option) (int, error) {
	s := int(fd)
	var v int
	var err error
	switch opt {
	case TOS:
		level, name := tosLevelName(family)
		v, err = unix.GetsockoptInt(s, level, name)
	case Linger:
		var l *unix.Linger
		l, err = unix.GetsockoptLinger(s, unix.SOL_SOCKET, unix.SO_LINGER)
		if err == nil {
			v = -1
			if l.Onoff != 0 {
				v = int(l.Linger)
			}
		}
	default:
		o := intOptions[opt]
		v, err = unix.GetsockoptInt(s, o.level, o.name)
	}
	if err != nil {
		return 0, os.NewSyscallError("getsockopt", err)
	}
	return v, nil
}

// socketFamily reads SO_DOMAIN and, for AF_INET6, whether the socket is bound
// to an IPv4-mapped address (then its packets are IPv4 and TOS is IP_TOS).
func socketFamily(raw syscall.RawConn) (Family, error) {
	fam := FamilyUnknown
	var opErr error
	err := raw.Control(func(fd uintptr) {
		domain, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		if err != nil {
			opErr = os.NewSyscallError("getsockopt", err)
			return
		}
		switch domain {
		case unix.AF_INET:
			fam = FamilyIPv4
		case unix.AF_INET6:
			fam = FamilyIPv6
			sa, err := unix.Getsockname(int(fd))
			if err != nil {
				opErr = os.NewSyscallError("getsockname", err)
				return
			}
			if in6, ok := sa.(*unix.SockaddrInet6); ok && isV4Mapped(in6.Addr) {
				fam = FamilyIPv4Mapped
			}
		default:
			fam = FamilyOther
		}
	})
	if err != nil {
		return FamilyUnknown, err
	}
	return fam, opErr
}

func isV4Mapped(a [16]byte) bool {
	for _, b := range a[:10] {
		if b != 0 {
			return false
		}
	}
	return a[10] == 0xff && a[11] == 0xff
}

// Supported reports whether this platform applies options (Linux); where it
// is false every Set returns ErrUnsupported and callers fall back to the
// net package's own setters.
const Supported = true
