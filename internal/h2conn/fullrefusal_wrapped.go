//go:build go1.27 && !http2legacy

package h2conn

// refusesReservedWhenFull is false in wrapped mode (Go 1.27 and later):
// net/http's client waits for a stream when the connection is full, so
// "client conn not usable" always means the connection is done for, also
// when x/net's ClientConnState does not show it yet (x/net hears of a
// GOAWAY only when the connection closes).
const refusesReservedWhenFull = false

// stateTakesWriteLock is false in wrapped mode: ClientConn.State reads
// net/http's client state under its state mutex, never held across a
// write, so it may be asked on a request's goroutine.
const stateTakesWriteLock = false

// goAwayMarksDead is false in wrapped mode: x/net hears of a GOAWAY only
// when the connection closes, so a Conn that received one is not dead
// (MarkDead, watch.go) while its streams go on.
const goAwayMarksDead = false
