package sockopt

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Option names one socket option a Guard can apply. The zero Option is
// NoDelay.
type Option int

// The options a Guard knows. Boolean options take 0 (off) or 1 (on); the
// others take the value documented next to them.
const (
	// NoDelay is TCP_NODELAY: 1 disables Nagle's algorithm (Go's default for
	// every TCP connection), 0 enables it.
	NoDelay Option = iota
	// KeepAlive is SO_KEEPALIVE: 1 enables TCP keep-alive probes.
	KeepAlive
	// KeepIdle is TCP_KEEPIDLE in seconds of idleness before the first probe.
	KeepIdle
	// KeepInterval is TCP_KEEPINTVL in seconds between probes.
	KeepInterval
	// KeepCount is TCP_KEEPCNT, the number of unanswered probes before the
	// connection is dropped.
	KeepCount
	// UserTimeout is TCP_USER_TIMEOUT in milliseconds; 0 means the system
	// default.
	UserTimeout
	// RecvBuffer is SO_RCVBUF in bytes (the kernel may double it).
	RecvBuffer
	// SendBuffer is SO_SNDBUF in bytes (the kernel may double it).
	SendBuffer
	// TOS is the traffic class byte: IP_TOS on IPv4 sockets (and on IPv6
	// sockets carrying IPv4-mapped traffic), IPV6_TCLASS on IPv6 sockets.
	TOS
	// Linger is SO_LINGER: a negative value turns lingering off; 0 or more
	// turns it on with that many seconds (0 resets the connection on Close).
	Linger
	// ReusePort is SO_REUSEPORT for listening sockets: 1 enables it. It only
	// matters before bind, so it is applied through a net.ListenConfig
	// Control function (see ListenControl).
	ReusePort

	numOptions
)

var optionNames = [numOptions]string{
	NoDelay:      "TCP_NODELAY",
	KeepAlive:    "SO_KEEPALIVE",
	KeepIdle:     "TCP_KEEPIDLE",
	KeepInterval: "TCP_KEEPINTVL",
	KeepCount:    "TCP_KEEPCNT",
	UserTimeout:  "TCP_USER_TIMEOUT",
	RecvBuffer:   "SO_RCVBUF",
	SendBuffer:   "SO_SNDBUF",
	TOS:          "IP_TOS/IPV6_TCLASS",
	Linger:       "SO_LINGER",
	ReusePort:    "SO_REUSEPORT",
}

// String returns the socket option's C name, for example "TCP_NODELAY".
func (o Option) String() string {
	if o < 0 || o >= numOptions {
		return "Option(" + strconv.Itoa(int(o)) + ")"
	}
	return optionNames[o]
}

// Setting pairs an option with the value to apply.
type Setting struct {
	Option Option
	Value  int
}

// notApplied is the recorded value of an option the Guard has not applied.
// validate rejects it, so no accepted value can ever equal it.
const notApplied = math.MinInt

// ErrUnsupported is returned (wrapped) when the platform or the connection
// cannot carry socket options.
var ErrUnsupported = errors.New("sockopt: not supported on this platform")

// ErrInvalidValue is returned (wrapped) for a value outside an option's
// range, before any syscall is made.
var ErrInvalidValue = errors.New("sockopt: invalid value")

// ErrUnknownOption is returned (wrapped) for an Option outside the known set.
var ErrUnknownOption = errors.New("sockopt: unknown option")

// Validate checks value for opt without a syscall: the check Set and Apply
// make first, with the same errors (ErrUnknownOption or ErrInvalidValue,
// wrapped with the option and the value). It lets a caller reject a bad
// request before it has a socket to apply it to.
func Validate(opt Option, value int) error { return validate(opt, value) }

// validate rejects values no kernel accepts for opt. Ranges the kernel itself
// checks (for example TCP_KEEPIDLE 0) are left to it so its errno is reported.
func validate(opt Option, value int) error {
	if opt < 0 || opt >= numOptions {
		return fmt.Errorf("%w: %d", ErrUnknownOption, int(opt))
	}
	switch opt {
	case NoDelay, KeepAlive, ReusePort:
		if value != 0 && value != 1 {
			return fmt.Errorf("sockopt: set %s=%d: %w (want 0 or 1)", opt, value, ErrInvalidValue)
		}
	case Linger:
		if value > math.MaxInt32 || value < math.MinInt32 {
			return fmt.Errorf("sockopt: set %s=%d: %w (out of int32 range)", opt, value, ErrInvalidValue)
		}
	case TOS:
		if value < 0 || value > 255 {
			return fmt.Errorf("sockopt: set %s=%d: %w (want 0..255)", opt, value, ErrInvalidValue)
		}
	default:
		if value < 0 || value > math.MaxInt32 {
			return fmt.Errorf("sockopt: set %s=%d: %w (want 0..%d)", opt, value, ErrInvalidValue, math.MaxInt32)
		}
	}
	return nil
}

// normalize folds values that mean the same thing to the kernel into one, so
// the record compares them as equal (every negative Linger means "off").
func normalize(opt Option, value int) int {
	if opt == Linger && value < 0 {
		return -1
	}
	return value
}
