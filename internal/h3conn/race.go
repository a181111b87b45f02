package h3conn

import (
	"context"
	"io"
	"sync"
	"time"
)

// DefaultHeadStart is how long Race waits for QUIC before telling the
// caller to use TCP: above a loopback or LAN handshake, below what a user
// notices, in the range browsers use.
const DefaultHeadStart = 275 * time.Millisecond

// RaceOptions configures Race. The zero value waits DefaultHeadStart and
// closes a connection that completes after Race returned.
type RaceOptions[C io.Closer] struct {
	// HeadStart is how long QUIC has to complete before Race gives up on it
	// for this request. Zero means DefaultHeadStart; negative means do not
	// wait at all (the caller already has a TCP connection at hand).
	HeadStart time.Duration
	// TCPReady, when it yields or is closed, ends the head start at once:
	// for example an idle TCP connection became available. Nil never fires.
	TCPReady <-chan struct{}
	// Late receives the QUIC outcome when Race returned without it (head
	// start expired, TCPReady, or ctx ended): a connection to pool and mark
	// working, or an error to mark the alternative broken. It runs on the
	// dialling goroutine and should not block for long. Nil means a late
	// connection is closed and a late error dropped.
	Late func(C, error)
	// After makes the head start timer; nil means time.NewTimer. Tests
	// inject a clock here.
	After func(time.Duration) (<-chan time.Time, func() bool)
}

// Race gives the QUIC dial a head start over TCP. dial runs on a goroutine
// of its own with a context that keeps ctx's values (its httptrace hooks)
// but not its cancellation, so that a dial that lost still completes and
// its connection can serve later requests; dial must bound itself
// (Dialer.Dial does: HandshakeTimeout and Dialer.Close).
//
// Race returns, whichever comes first:
//   - dial's connection, nil: QUIC won; use it (and mark the alternative
//     working);
//   - nil, *QUICError: QUIC failed within the head start; mark the
//     alternative broken and use TCP;
//   - nil, ErrHeadStartExpired: the head start ran out or TCPReady fired;
//     use TCP, the outcome goes to Late;
//   - nil, ctx.Err(): the request ended; the outcome goes to Late.
//
// When the dial completes at the same moment the head start expires, the
// completed result wins. No goroutine outlives dial and Late.
func Race[C io.Closer](ctx context.Context, dial func(context.Context) (C, error), opts RaceOptions[C]) (C, error) {
	var zero C
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	h := &raceHandoff[C]{result: make(chan raceResult[C], 1), late: opts.Late}
	go h.run(context.WithoutCancel(ctx), dial)

	headStart := opts.HeadStart
	if headStart == 0 {
		headStart = DefaultHeadStart
	}
	var expired <-chan time.Time
	if headStart > 0 {
		after := opts.After
		if after == nil {
			after = newTimer
		}
		ch, stop := after(headStart)
		defer stop()
		expired = ch
	} else {
		closed := make(chan time.Time)
		close(closed)
		expired = closed
	}

	select {
	case r := <-h.result:
		return r.settle()
	case <-expired:
	case <-opts.TCPReady:
	case <-ctx.Done():
		if r, ok := h.abandon(); ok {
			r.deliver(opts.Late)
		}
		return zero, ctx.Err()
	}
	if r, ok := h.abandon(); ok {
		return r.settle()
	}
	return zero, ErrHeadStartExpired
}

func newTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// raceResult is a dial's outcome.
type raceResult[C io.Closer] struct {
	conn C
	err  error
}

func (r raceResult[C]) settle() (C, error) {
	if r.err != nil {
		var zero C
		return zero, &QUICError{Err: r.err}
	}
	return r.conn, nil
}

// deliver hands a result nobody waits for to late, or closes its connection.
func (r raceResult[C]) deliver(late func(C, error)) {
	if late != nil {
		late(r.conn, r.err)
		return
	}
	if r.err == nil {
		r.conn.Close()
	}
}

// raceHandoff passes the dial's outcome either to Race, while it waits, or
// to Late once Race has given up: exactly one of them gets it.
type raceHandoff[C io.Closer] struct {
	result chan raceResult[C] // buffered: the dialer never blocks
	late   func(C, error)

	mu        sync.Mutex // guards abandoned and the hand-over to result
	abandoned bool
}

func (h *raceHandoff[C]) run(ctx context.Context, dial func(context.Context) (C, error)) {
	c, err := dial(ctx)
	r := raceResult[C]{conn: c, err: err}
	h.mu.Lock()
	if !h.abandoned {
		h.result <- r
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	r.deliver(h.late)
}

// abandon tells the dialer that Race stopped waiting, unless its result is
// already there, in which case it is returned.
func (h *raceHandoff[C]) abandon() (raceResult[C], bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case r := <-h.result:
		return r, true
	default:
		h.abandoned = true
		return raceResult[C]{}, false
	}
}
