package server

import (
	"fmt"
	"net"
	"sync/atomic"
)

// DefaultQUICRetryThreshold is the number of half-open HTTP/3 handshakes
// above which new clients are asked to validate their address with a QUIC
// Retry, when Server.QUICRetryThreshold is zero.
const DefaultQUICRetryThreshold = 64

// Values of Server.QUICRetryThreshold that are not a threshold.
const (
	// QUICRetryAlways sends every new HTTP/3 client a Retry: one extra round
	// trip per connection (not per request), no per-packet state ever.
	QUICRetryAlways = -1
	// QUICRetryNever never sends a Retry, as quic-go does by default: every
	// Initial packet from an unvalidated address gets a connection.
	QUICRetryNever = -2
)

// checkQUICRetryThreshold rejects negative values other than the two named
// ones, so that a typo does not silently pick a policy.
func checkQUICRetryThreshold(n int) error {
	if n < 0 && n != QUICRetryAlways && n != QUICRetryNever {
		return fmt.Errorf("server: QUICRetryThreshold %d: want a positive threshold, 0, QUICRetryAlways or QUICRetryNever", n)
	}
	return nil
}

// handshakeGauge counts HTTP/3 handshakes in progress on one Server: a
// connection is counted from the moment quic-go creates it for a client's
// first Initial (quic.Transport.ConnContext) until HTTP/3 accepts it after
// its handshake (http3.Server.ConnContext) or it closes, whichever comes
// first. Costs per connection: one small allocation, two atomic adds, one
// context.AfterFunc registration; nothing per packet.
type handshakeGauge struct {
	n atomic.Int64
}

// halfOpen is one connection's place in a handshakeGauge.
type halfOpen struct {
	g    *handshakeGauge
	done atomic.Bool // the connection left the gauge
}

// start counts a new connection.
func (g *handshakeGauge) start() *halfOpen {
	g.n.Add(1)
	return &halfOpen{g: g}
}

// finish takes the connection out of the gauge; only the first call counts.
func (h *halfOpen) finish() {
	if h.done.CompareAndSwap(false, true) {
		h.g.n.Add(-1)
	}
}

// handshakeKey is the connection context key under which http3's
// ConnContext finds the connection's *halfOpen.
type handshakeKey struct{}

// verifySourceAddress returns the quic.Transport.VerifySourceAddress for a
// QUICRetryThreshold value, and the gauge it reads (nil when nothing needs
// counting). quic-go calls it for each Initial packet that carries no valid
// token; true answers with a Retry instead of creating a connection.
func verifySourceAddress(threshold int) (func(net.Addr) bool, *handshakeGauge) {
	switch threshold {
	case QUICRetryNever:
		return nil, nil
	case QUICRetryAlways:
		return func(net.Addr) bool { return true }, nil
	case 0:
		threshold = DefaultQUICRetryThreshold
	}
	g := &handshakeGauge{}
	limit := int64(threshold)
	return func(net.Addr) bool { return g.n.Load() >= limit }, g
}
