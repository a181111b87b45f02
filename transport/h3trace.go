package transport

import (
	"crypto/tls"
	"fmt"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/ferryhttp/ferry/internal/h3conn"
)

// httptrace for requests that go, or meant to go, over HTTP/3.
//
// GetConn fires once, when the request is routed to HTTP/3 (before any
// pool lookup or dial wait). A request that then goes over TCP without
// having been sent over HTTP/3 does not fire it a second time; a request
// sent over HTTP/3 and retried over TCP (not sent, or refused unprocessed)
// fires it again for the new attempt, as net/http does for every retry.
//
// The QUIC dial runs on a flight goroutine that no request owns. The request
// that started the flight and waits for it sees the dial's DNS, connect
// ("udp") and TLS hooks, fired on its own goroutine while it waits, in the
// order the dial produced them: the flight posts them to a small buffered
// channel and never blocks on it. When that request stops waiting (the head
// start ended, or it was cancelled) it fires the hooks already posted,
// closes every phase still open with the reason it stopped
// (TLSHandshakeDone, then ConnectDone, or DNSDone) and detaches: nothing of
// the dial reaches its hooks afterwards, so every Start has its Done and no
// hook runs after RoundTrip returned. Requests that join a flight, and one
// that takes a TCP connection at hand instead of waiting, see no dial hooks.

// errQUICLate closes the open QUIC dial phases of a request that stopped
// waiting for the handshake when the head start ended.
var errQUICLate = fmt.Errorf("ferry/transport: QUIC handshake not done when the head start ended; request sent over TCP: %w", h3conn.ErrHeadStartExpired)

// h3DialEventCap bounds the events one dial posts: DNSStart, DNSDone,
// ConnectStart, TLSHandshakeStart, TLSHandshakeDone, ConnectDone.
const h3DialEventCap = 8

type h3DialEventKind uint8

const (
	h3DNSStart h3DialEventKind = iota
	h3DNSDone
	h3ConnectStart
	h3ConnectDone
	h3TLSStart
	h3TLSDone
)

// h3DialEvent is one hook call of the dial, with its arguments.
type h3DialEvent struct {
	kind     h3DialEventKind
	host     string                // DNSStart
	dnsDone  httptrace.DNSDoneInfo // DNSDone
	network  string                // ConnectStart, ConnectDone
	addr     string                // ConnectStart, ConnectDone
	tlsState tls.ConnectionState   // TLSHandshakeDone
	err      error                 // the Done hooks
}

// h3DialEvents carries one dial's hooks to the request that started it.
// The flight goroutine posts; only the request's goroutine fires hooks and
// touches the open-phase fields.
type h3DialEvents struct {
	trace    *httptrace.ClientTrace // the request's hooks
	ch       chan h3DialEvent
	detached atomic.Bool // the request stopped listening: posts are dropped

	// Phases started and not yet done, as fired to the request.
	dnsOpen, connOpen, tlsOpen bool
	connNetwork, connAddr      string
}

// newH3DialEvents returns the carrier for a request whose trace has any
// hook a dial fires, or nil.
func newH3DialEvents(trace *httptrace.ClientTrace) *h3DialEvents {
	if trace == nil || trace.DNSStart == nil && trace.DNSDone == nil &&
		trace.ConnectStart == nil && trace.ConnectDone == nil &&
		trace.TLSHandshakeStart == nil && trace.TLSHandshakeDone == nil {
		return nil
	}
	return &h3DialEvents{trace: trace, ch: make(chan h3DialEvent, h3DialEventCap)}
}

// events is the channel to select on; nil (never ready) for a nil carrier.
func (e *h3DialEvents) events() <-chan h3DialEvent {
	if e == nil {
		return nil
	}
	return e.ch
}

// post queues ev for the request unless it detached; it never blocks.
func (e *h3DialEvents) post(ev h3DialEvent) {
	if e.detached.Load() {
		return
	}
	select {
	case e.ch <- ev:
	default:
	}
}

// hooks are the trace the flight dials with: each hook posts an event.
func (e *h3DialEvents) hooks() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(i httptrace.DNSStartInfo) { e.post(h3DialEvent{kind: h3DNSStart, host: i.Host}) },
		DNSDone: func(i httptrace.DNSDoneInfo) {
			e.post(h3DialEvent{kind: h3DNSDone, dnsDone: i})
		},
		ConnectStart: func(network, addr string) {
			e.post(h3DialEvent{kind: h3ConnectStart, network: network, addr: addr})
		},
		ConnectDone: func(network, addr string, err error) {
			e.post(h3DialEvent{kind: h3ConnectDone, network: network, addr: addr, err: err})
		},
		TLSHandshakeStart: func() { e.post(h3DialEvent{kind: h3TLSStart}) },
		TLSHandshakeDone: func(s tls.ConnectionState, err error) {
			e.post(h3DialEvent{kind: h3TLSDone, tlsState: s, err: err})
		},
	}
}

// fire calls the request's hook for ev and tracks the open phases.
func (e *h3DialEvents) fire(ev h3DialEvent) {
	t := e.trace
	switch ev.kind {
	case h3DNSStart:
		e.dnsOpen = true
		if t.DNSStart != nil {
			t.DNSStart(httptrace.DNSStartInfo{Host: ev.host})
		}
	case h3DNSDone:
		e.dnsOpen = false
		if t.DNSDone != nil {
			t.DNSDone(ev.dnsDone)
		}
	case h3ConnectStart:
		e.connOpen, e.connNetwork, e.connAddr = true, ev.network, ev.addr
		if t.ConnectStart != nil {
			t.ConnectStart(ev.network, ev.addr)
		}
	case h3ConnectDone:
		e.connOpen = false
		if t.ConnectDone != nil {
			t.ConnectDone(ev.network, ev.addr, ev.err)
		}
	case h3TLSStart:
		e.tlsOpen = true
		if t.TLSHandshakeStart != nil {
			t.TLSHandshakeStart()
		}
	case h3TLSDone:
		e.tlsOpen = false
		if t.TLSHandshakeDone != nil {
			t.TLSHandshakeDone(ev.tlsState, ev.err)
		}
	}
}

// drain fires every event already posted. After the flight ended, that is
// all of them.
func (e *h3DialEvents) drain() {
	if e == nil {
		return
	}
	for {
		select {
		case ev := <-e.ch:
			e.fire(ev)
		default:
			return
		}
	}
}

// abandon detaches the request from a dial still running: the events
// already posted are fired, and the phases left open are closed with err.
func (e *h3DialEvents) abandon(err error) {
	if e == nil {
		return
	}
	e.detached.Store(true)
	e.drain()
	if e.tlsOpen {
		e.fire(h3DialEvent{kind: h3TLSDone, err: err})
	}
	if e.connOpen {
		e.fire(h3DialEvent{kind: h3ConnectDone, network: e.connNetwork, addr: e.connAddr, err: err})
	}
	if e.dnsOpen {
		e.fire(h3DialEvent{kind: h3DNSDone, dnsDone: httptrace.DNSDoneInfo{Err: err}})
	}
}

// detach drops the dial's hooks unseen: the request did not wait for it.
func (e *h3DialEvents) detach() {
	if e != nil {
		e.detached.Store(true)
	}
}
