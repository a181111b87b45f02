//go:build ferry_nostats

package transport

// countStats is off: built with the ferry_nostats tag, the request-path
// counters of Stats are compiled out and read as zero.
const countStats = false
