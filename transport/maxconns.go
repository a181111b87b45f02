package transport

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/h3conn"
)

// MaxConnsPerHost over TCP and QUIC together.
//
// net/http documents MaxConnsPerHost as the limit on all of a host's
// connections, dialling, active and idle. ferry also opens QUIC
// connections, so with a limit every QUIC dial and every QUIC connection
// holds a slot of the main pool (t.pool) under the origin's TCP key, the
// key of the requests that would otherwise go over TCP: one count, one
// queue, and the pool's FIFO waiters are woken when a connection of either
// protocol gives its slot back. The HTTP/3 pool has no limit of its own.
// (Two counters kept in step, one per pool, were the alternative; they
// need a lock over both pools and still a way to wake the waiters of one
// when the other frees a slot, which is what sharing the slot gives.)
//
// Where a slot changes hands:
//
//   - A QUIC dial takes a slot before it starts (takeQUICSlot): a free one
//     (idlepool TryReserve, which never overtakes a waiter), or the slot of
//     an idle TCP connection of the origin, which it closes. So with a
//     limit of 1 an origin still moves to HTTP/3 once its TCP connection
//     is idle. A dial that fails gives its slot back and the request goes
//     over TCP, as without a limit.
//   - A QUIC connection keeps its dial's slot until it is closed: by
//     CloseIdleConnections, by the HTTP/3 pool's idle expiry or the peer
//     (then the slot is taken back when it is next looked for: quicReclaim
//     frees the slot of a dead connection once its last stream ended), or
//     to make room for TCP.
//   - A request going over TCP that has to wait for a slot first closes the
//     idle QUIC connections of its key (quicYieldSlot, run by slotWait.Done
//     once the request is queued), and a QUIC connection whose last stream
//     ends while TCP requests wait is closed (quicStreamDone): a request
//     never waits for ever behind an idle connection of the other protocol.
//     Both run after the change they look for is visible to the other side
//     (queued, then look at the streams; stream released, then look at
//     the queue), so one of the two always sees the other.
//   - A request that may use HTTP/3 and would find its key full of QUIC
//     slots (a dial in progress, or a connection whose streams are all in
//     use) does not queue for TCP behind them: it waits for the next QUIC
//     event (dial ended, stream ended, slot given back) or TCP slot event
//     (a TCP connection idle, closed or with a stream freed: tcpSlotEvent)
//     and looks again (h3ConnLimited).
//
// Without a limit nothing here runs but tcpSlotEvent's test of
// MaxConnsPerHost (one load per request): no lock or allocation is added
// to the request path.

// quicSlots is what QUIC holds of MaxConnsPerHost, per TCP key.
type quicSlots struct {
	// held counts the slots held now over all keys, so that a TCP request
	// about to wait skips the search when QUIC holds none.
	held atomic.Int64

	// mu guards conns, perKey and wake. It is never held while a
	// connection, the pool or h3Client.mu is used.
	mu     sync.Mutex
	conns  map[*h3conn.Conn]quicSlot // connections holding a slot
	perKey map[connKey]int           // slots held per TCP key: dials and connections
	// wake is closed (and cleared) by changed; nil until a request waits.
	wake chan struct{}
	// parked counts the requests in h3ConnLimited's loop, so that TCP
	// slot events (tcpSlotEvent) wake them only when there are some. A
	// request counts itself before it first takes wake: an event after
	// that either sees it or came before its checks.
	parked atomic.Int32
}

// quicSlot is the TCP key a QUIC connection holds a slot of, and its
// HTTP/3 pool key.
type quicSlot struct {
	tcp connKey
	h3  h3Key
}

// add changes the count of slots QUIC holds for key by d.
func (s *quicSlots) add(key connKey, d int) {
	s.mu.Lock()
	if s.perKey == nil {
		s.perKey = make(map[connKey]int)
	}
	if n := s.perKey[key] + d; n > 0 {
		s.perKey[key] = n
	} else {
		delete(s.perKey, key)
	}
	s.mu.Unlock()
	s.held.Add(int64(d))
}

// holds reports whether a QUIC dial or connection holds a slot of key.
func (s *quicSlots) holds(key connKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perKey[key] > 0
}

// adopt records that c, dialled for hk, now holds its dial's slot of key.
func (s *quicSlots) adopt(c *h3conn.Conn, hk h3Key, key connKey) {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = make(map[*h3conn.Conn]quicSlot)
	}
	s.conns[c] = quicSlot{tcp: key, h3: hk}
	s.mu.Unlock()
}

// forget removes c and reports the slot it held, once.
func (s *quicSlots) forget(c *h3conn.Conn) (quicSlot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.conns[c]
	if ok {
		delete(s.conns, c)
	}
	return slot, ok
}

// isFor reports whether c is a connection to hk.
func (s *quicSlots) isFor(c *h3conn.Conn, hk h3Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.conns[c]
	return ok && slot.h3 == hk
}

// of returns the connections holding a slot of key.
func (s *quicSlots) of(key connKey) []*h3conn.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*h3conn.Conn
	for c, slot := range s.conns {
		if slot.tcp == key {
			out = append(out, c)
		}
	}
	return out
}

// waitChan returns a channel closed at the next changed.
func (s *quicSlots) waitChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

// changed wakes the requests waiting for a QUIC event.
func (s *quicSlots) changed() {
	s.mu.Lock()
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	s.mu.Unlock()
}

// takeQUICSlot reserves a slot of key for a QUIC dial: a free one, else
// one held by a dead QUIC connection, else the slot of an idle TCP
// connection of key, which it closes (an HTTP/1.1 one hands its slot over
// directly; an HTTP/2 one gives it back to the pool, where a waiter may
// take it first). It reports false when every slot is in use.
func (t *Transport) takeQUICSlot(h *h3Client, key connKey) bool {
	// Counted first: a request that finds the key full while this one
	// closes an idle TCP connection for its slot sees QUIC holding it, and
	// waits for the QUIC event rather than queueing for TCP.
	h.quic.add(key, 1)
	ok := t.pool.TryReserve(key)
	if !ok && t.quicReclaim(h, key, false, h3Key{}) {
		ok = t.pool.TryReserve(key)
	}
	if !ok {
		if pc, _, idle := t.pool.TryGet(key); idle {
			pc.Close() // its slot is now the dial's
			ok = true
		}
	}
	if !ok && t.closeIdleSharedTCP(key) {
		ok = t.pool.TryReserve(key)
	}
	if !ok {
		// No changed() here: a request that saw this dial's count and
		// waits in h3ConnLimited is woken by the next TCP slot event
		// (tcpSlotEvent) or QUIC event, and the request calling this,
		// itself in h3ConnLimited's loop, would only wake itself and
		// spin (TestMaxConnsH3WaiterParksUntilStreamEnd).
		h.quic.add(key, -1)
	}
	return ok
}

// closeIdleSharedTCP closes one HTTP/2 connection of key without a
// stream in use, releasing its slot, and reports whether it did.
func (t *Transport) closeIdleSharedTCP(key connKey) bool {
	for _, e := range t.h2.live.snapshot() {
		if e.key != key {
			continue
		}
		ic, ok := e.c.(interface{ CloseIfIdle() bool })
		if !ok || !ic.CloseIfIdle() {
			continue
		}
		t.h2.live.remove(e.c)
		t.pool.RemoveShared(key, e.c)
		return true
	}
	return false
}

// releaseQUICSlot gives back a slot of key held by a QUIC dial or
// connection: the first TCP waiter of key gets it.
func (t *Transport) releaseQUICSlot(h *h3Client, key connKey) {
	h.quic.add(key, -1)
	t.pool.Release(key)
	h.quic.changed()
}

// quicGone releases the slots of QUIC connections that were closed.
func (t *Transport) quicGone(h *h3Client, gone []*h3conn.Conn) {
	for _, c := range gone {
		if slot, ok := h.quic.forget(c); ok {
			t.releaseQUICSlot(h, slot.tcp)
		}
	}
}

// quicReclaim frees the slots of key's QUIC connections that are dead
// with no stream left (closing them for good), and, when closeIdle is
// set, closes those without a stream in use, except connections to keep
// (the alternative a request is about to use; the zero h3Key keeps none).
// It reports whether it freed a slot.
func (t *Transport) quicReclaim(h *h3Client, key connKey, closeIdle bool, keep h3Key) bool {
	freed := false
	for _, c := range h.quic.of(key) {
		_, idle := c.IdleSince()
		if !idle {
			continue // streams in use: its slot stays until the last one ends
		}
		if c.Usable() {
			if !closeIdle || h.quic.isFor(c, keep) || !c.CloseIfIdle() {
				continue
			}
		} else {
			c.Close()
		}
		slot, ok := h.quic.forget(c)
		if !ok {
			continue // released by another goroutine meanwhile
		}
		h.pool.RemoveShared(slot.h3, c)
		t.releaseQUICSlot(h, key)
		freed = true
	}
	return freed
}

// quicYieldSlot runs when a TCP request of key is queued for a slot
// (slotWait.Done): the key's idle QUIC connections give their slots up.
func (t *Transport) quicYieldSlot(key connKey) {
	h := &t.h3
	if h.quic.held.Load() == 0 {
		return
	}
	t.quicReclaim(h, key, true, h3Key{})
}

// quicYieldIdle closes key's idle QUIC connections when TCP requests of key
// are waiting for a slot.
func (t *Transport) quicYieldIdle(h *h3Client, key connKey) {
	if t.pool.Waiting(key) > 0 {
		t.quicReclaim(h, key, true, h3Key{})
	}
}

// h3ExchangeSlot is what an HTTP/3 request's end needs with
// MaxConnsPerHost: its connection and the TCP key it holds a slot of.
type h3ExchangeSlot struct {
	t    *Transport
	conn *h3conn.Conn
	key  connKey
}

// quicStreamDone runs when an HTTP/3 request on c ended (its stream is
// released): requests waiting for a QUIC event look again, and c gives its
// slot up if it is now idle and TCP requests of key wait, or if it died.
func (s *h3ExchangeSlot) quicStreamDone() {
	t, h := s.t, &s.t.h3
	h.quic.changed()
	waiting := t.pool.Waiting(s.key) > 0
	if waiting || !s.conn.Usable() {
		t.quicReclaim(h, s.key, waiting, h3Key{})
	}
}

// h3ConnLimited is h3Conn with MaxConnsPerHost: when no HTTP/3 stream is
// to be had and TCP could only queue behind slots QUIC holds, the request
// waits for the next QUIC event and looks again, rather than waiting in
// the TCP queue for slots that only an idle QUIC connection would give up.
func (t *Transport) h3ConnLimited(req *http.Request, o *h1conn.Outgoing, h *h3Client, hk h3Key, key connKey) (*h3conn.Conn, error) {
	if s, ok := h.pool.GetShared(hk); ok {
		return s.(*h3conn.Conn), nil // the common case, without the loop's locks
	}
	ctx := req.Context()
	h.quic.parked.Add(1)
	defer h.quic.parked.Add(-1)
	for {
		wake := h.quic.waitChan()
		alt, ok := h.cache.Usable(hk.origin, "h3")
		if !ok || alt.Host != hk.altHost || alt.Port != hk.altPort {
			return nil, nil // the alternative failed or changed meanwhile
		}
		c, err := t.h3ConnOnce(req, o, h, hk, key, alt)
		if c != nil || err != nil {
			return c, err
		}
		if t.pool.ConnsLen(key) < t.MaxConnsPerHost || t.tcpAtHand(key) {
			return nil, nil // TCP goes on at once
		}
		if t.quicReclaim(h, key, true, hk) {
			continue // a slot came free: a QUIC dial may take it
		}
		if !h.quic.holds(key) {
			return nil, nil // TCP connections fill the key: queue with TCP
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-req.Cancel:
			return nil, errRequestCanceled
		}
	}
}

// releaseTCPSlot gives back a slot of key that a TCP request or connection
// held (a connection closed, a dial that failed or is not needed), waking
// the HTTP/3 requests that may want it (tcpSlotEvent). Every such release
// goes through here, so that none forgets the wake.
func (t *Transport) releaseTCPSlot(key connKey) {
	t.pool.Release(key)
	t.tcpSlotEvent()
}

// tcpSlotEvent wakes the HTTP/3 requests waiting in h3ConnLimited when a
// TCP connection of some key went idle, freed a stream or gave its slot
// back: such a request may now take it (TestMaxConnsH3WaiterTakesFreedTCP;
// before, it waited for the next QUIC event, seconds for a stalled dial).
// Without MaxConnsPerHost or a waiting request it costs two loads.
func (t *Transport) tcpSlotEvent() {
	if t.MaxConnsPerHost > 0 && t.h3.quic.parked.Load() > 0 {
		t.h3.quic.changed()
	}
}
