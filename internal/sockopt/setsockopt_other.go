//go:build !linux

package sockopt

import (
	"fmt"
	"syscall"
)

// Setsockopt makes one unguarded setsockopt call on fd. On this platform it
// always returns ErrUnsupported.
func Setsockopt(fd uintptr, family Family, opt Option, value int) error {
	return fmt.Errorf("%s: %w", opt, ErrUnsupported)
}

func getsockopt(fd uintptr, family Family, opt Option) (int, error) {
	return 0, fmt.Errorf("%s: %w", opt, ErrUnsupported)
}

func socketFamily(raw syscall.RawConn) (Family, error) {
	return FamilyUnknown, nil
}

// Supported reports whether this platform applies options (Linux); where it
// is false every Set returns ErrUnsupported and callers fall back to the
// net package's own setters.
const Supported = false
