package sockio

import (
	"os"
	"sync/atomic"
)

// enabled is whether Wrap wraps: on Linux unless FERRY_RAWIO=off.
var enabled atomic.Bool

func init() {
	enabled.Store(rawSupported && os.Getenv("FERRY_RAWIO") != "off")
}

// Enabled reports whether Wrap wraps.
func Enabled() bool { return enabled.Load() }

// SetEnabled turns wrapping on or off for connections wrapped from now on
// (where the platform supports it), returning the previous setting; for
// tests that compare both ways.
func SetEnabled(on bool) (was bool) {
	return enabled.Swap(on && rawSupported)
}
