//go:build !(go1.27 && !http2legacy)

package h2conn

// refusesReservedWhenFull: legacy x/net (Go 1.26, or the http2legacy tag)
// fails a request that holds a stream reservation with "client conn not
// usable" when the connection filled up after the reservation (a stream
// reset by a cancelled request counts until the server acknowledges the
// reset, and twice until x/net forgets the stream; a server may lower its
// limit). Whether the connection is in fact closing or closed is then
// judged from what ferry knows, and x/net's ClientConnState is asked on a
// goroutine of its own (judge.go).
const refusesReservedWhenFull = true

// stateTakesWriteLock: legacy x/net's ClientConn.State takes the
// connection's write lock, which a write to a peer that does not read holds
// for as long as the write is stuck (without WriteByteTimeout, for ever).
// So State is never called on a request's goroutine (judge.go).
const stateTakesWriteLock = true

// goAwayMarksDead: legacy x/net reports a GOAWAY to the ClientConnPool
// (MarkDead, watch.go) as it reads it, so a Conn is dead from then on.
const goAwayMarksDead = true
