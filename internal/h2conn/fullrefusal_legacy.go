//go:build !(go1.27 && !http2legacy)

package h2conn

// refusesReservedWhenFull: legacy x/net (Go 1.26, or the http2legacy tag)
// fails a request that holds a stream reservation with "client conn not
// usable" when the connection filled up after the reservation (a stream
// reset by a cancelled request counts until the server acknowledges the
// reset, and twice until x/net forgets the stream; a server may lower its
// limit). Its ClientConnState then says whether the connection is in fact
// closing (GOAWAY, doNotReuse, single use) or closed (judgeNotProcessed in
// roundtrip.go).
const refusesReservedWhenFull = true
