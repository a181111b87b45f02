package h3conn

import (
	"crypto/tls"
	"net/http/httptrace"
	"sync/atomic"
)

// The httptrace hooks of a QUIC dial, for the request that started it.
//
// The transport fires GetConn for a request routed to HTTP/3:
// once, before any pool lookup or dial wait. A request that then goes over TCP without
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

// dialEventCap bounds the events one dial posts: DNSStart, DNSDone,
// ConnectStart, TLSHandshakeStart, TLSHandshakeDone, ConnectDone.
const dialEventCap = 8

type dialEventKind uint8

const (
	evDNSStart dialEventKind = iota
	evDNSDone
	evConnectStart
	evConnectDone
	evTLSStart
	evTLSDone
)

// DialEvent is one hook call of the dial, with its arguments.
type DialEvent struct {
	kind     dialEventKind
	host     string                // DNSStart
	dnsDone  httptrace.DNSDoneInfo // DNSDone
	network  string                // ConnectStart, ConnectDone
	addr     string                // ConnectStart, ConnectDone
	tlsState tls.ConnectionState   // TLSHandshakeDone
	err      error                 // the Done hooks
}

// DialEvents carries one dial's hooks to the request that started it.
// The flight goroutine posts; only the request's goroutine fires hooks and
// touches the open-phase fields.
type DialEvents struct {
	trace    *httptrace.ClientTrace // the request's hooks
	ch       chan DialEvent
	detached atomic.Bool // the request stopped listening: posts are dropped

	// Phases started and not yet done, as fired to the request.
	dnsOpen, connOpen, tlsOpen bool
	connNetwork, connAddr      string
}

// NewDialEvents returns the carrier for a request whose trace has any
// hook a dial fires, or nil.
func NewDialEvents(trace *httptrace.ClientTrace) *DialEvents {
	if trace == nil || trace.DNSStart == nil && trace.DNSDone == nil &&
		trace.ConnectStart == nil && trace.ConnectDone == nil &&
		trace.TLSHandshakeStart == nil && trace.TLSHandshakeDone == nil {
		return nil
	}
	return &DialEvents{trace: trace, ch: make(chan DialEvent, dialEventCap)}
}

// Events is the channel to select on; nil (never ready) for a nil carrier.
func (e *DialEvents) Events() <-chan DialEvent {
	if e == nil {
		return nil
	}
	return e.ch
}

// post queues ev for the request unless it detached; it never blocks.
func (e *DialEvents) post(ev DialEvent) {
	if e.detached.Load() {
		return
	}
	select {
	case e.ch <- ev:
	default:
	}
}

// Hooks are the trace the flight dials with: each hook posts an event.
func (e *DialEvents) Hooks() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(i httptrace.DNSStartInfo) { e.post(DialEvent{kind: evDNSStart, host: i.Host}) },
		DNSDone: func(i httptrace.DNSDoneInfo) {
			e.post(DialEvent{kind: evDNSDone, dnsDone: i})
		},
		ConnectStart: func(network, addr string) {
			e.post(DialEvent{kind: evConnectStart, network: network, addr: addr})
		},
		ConnectDone: func(network, addr string, err error) {
			e.post(DialEvent{kind: evConnectDone, network: network, addr: addr, err: err})
		},
		TLSHandshakeStart: func() { e.post(DialEvent{kind: evTLSStart}) },
		TLSHandshakeDone: func(s tls.ConnectionState, err error) {
			e.post(DialEvent{kind: evTLSDone, tlsState: s, err: err})
		},
	}
}

// Fire calls the request's hook for ev and tracks the open phases.
func (e *DialEvents) Fire(ev DialEvent) {
	t := e.trace
	switch ev.kind {
	case evDNSStart:
		e.dnsOpen = true
		if t.DNSStart != nil {
			t.DNSStart(httptrace.DNSStartInfo{Host: ev.host})
		}
	case evDNSDone:
		e.dnsOpen = false
		if t.DNSDone != nil {
			t.DNSDone(ev.dnsDone)
		}
	case evConnectStart:
		e.connOpen, e.connNetwork, e.connAddr = true, ev.network, ev.addr
		if t.ConnectStart != nil {
			t.ConnectStart(ev.network, ev.addr)
		}
	case evConnectDone:
		e.connOpen = false
		if t.ConnectDone != nil {
			t.ConnectDone(ev.network, ev.addr, ev.err)
		}
	case evTLSStart:
		e.tlsOpen = true
		if t.TLSHandshakeStart != nil {
			t.TLSHandshakeStart()
		}
	case evTLSDone:
		e.tlsOpen = false
		if t.TLSHandshakeDone != nil {
			t.TLSHandshakeDone(ev.tlsState, ev.err)
		}
	}
}

// Drain fires every event already posted. After the flight ended, that is
// all of them.
func (e *DialEvents) Drain() {
	if e == nil {
		return
	}
	for {
		select {
		case ev := <-e.ch:
			e.Fire(ev)
		default:
			return
		}
	}
}

// Abandon detaches the request from a dial still running: the events
// already posted are fired, and the phases left open are closed with err.
func (e *DialEvents) Abandon(err error) {
	if e == nil {
		return
	}
	e.detached.Store(true)
	e.Drain()
	if e.tlsOpen {
		e.Fire(DialEvent{kind: evTLSDone, err: err})
	}
	if e.connOpen {
		e.Fire(DialEvent{kind: evConnectDone, network: e.connNetwork, addr: e.connAddr, err: err})
	}
	if e.dnsOpen {
		e.Fire(DialEvent{kind: evDNSDone, dnsDone: httptrace.DNSDoneInfo{Err: err}})
	}
}

// Detach drops the dial's hooks unseen: the request did not wait for it.
func (e *DialEvents) Detach() {
	if e != nil {
		e.detached.Store(true)
	}
}
