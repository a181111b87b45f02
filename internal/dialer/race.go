package dialer

import (
	"context"
	"net"
	"net/http/httptrace"
	"net/netip"
	"time"
)

// attemptResult is what one connection attempt reports back to the race.
type attemptResult struct {
	addr netip.AddrPort
	conn net.Conn
	err  error
}

// valuesHidden passes a context's deadline and cancellation but none of its
// values, so net.Dialer does not find the caller's httptrace hooks and fire
// them a second time: the race fires them itself, in order.
type valuesHidden struct{ context.Context }

func (valuesHidden) Value(any) any { return nil }

// attemptDialer makes every connection attempt. Keep-alive is off here
// because it is applied through the connection's Guard. A net.Dialer is
// safe for concurrent use.
var attemptDialer = &net.Dialer{KeepAlive: -1}

// dialOne is the race with one runner: the attempt runs on the caller's
// goroutine, no channel, timer or goroutine needed.
func (d *Dialer) dialOne(ctx context.Context, trace *httptrace.ClientTrace, ap netip.AddrPort) (*Conn, error) {
	addr := ap.String()
	if trace != nil && trace.ConnectStart != nil {
		trace.ConnectStart("tcp", addr)
	}
	c, err := attemptDialer.DialContext(valuesHidden{ctx}, "tcp", addr)
	if trace != nil && trace.ConnectDone != nil {
		trace.ConnectDone("tcp", addr, err)
	}
	if err != nil {
		if cerr := contextEnded(ctx); cerr != nil {
			return nil, contextError(ap, cerr)
		}
		return nil, err
	}
	return d.newConn(c, ap)
}

// dialAddrs is DialAddrs without the Timeout wrapping.
//
// The race (RFC 8305 section 5): attempts start in interleaved order, one
// every fallbackDelay, or at once when the previous one failed; the first
// success wins. Losers are cancelled and drained before returning, so their
// ConnectDone hooks have fired and any connection they made is closed.
func (d *Dialer) dialAddrs(ctx context.Context, addrs []netip.Addr, port uint16) (*Conn, error) {
	if len(addrs) == 0 {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ErrNoAddresses}
	}
	order := interleave(addrs)
	if err := ctx.Err(); err != nil {
		return nil, contextError(netip.AddrPortFrom(order[0], port), err)
	}
	trace := httptrace.ContextClientTrace(ctx)
	if len(order) == 1 {
		return d.dialOne(ctx, trace, netip.AddrPortFrom(order[0], port))
	}
	raceCtx, cancelRace := context.WithCancel(ctx)
	defer cancelRace()
	attemptCtx := valuesHidden{raceCtx}

	results := make(chan attemptResult, len(order))
	next, inFlight := 0, 0
	start := func() {
		ap := netip.AddrPortFrom(order[next], port)
		next++
		inFlight++
		if trace != nil && trace.ConnectStart != nil {
			trace.ConnectStart("tcp", ap.String())
		}
		go func() {
			c, err := attemptDialer.DialContext(attemptCtx, "tcp", ap.String())
			results <- attemptResult{addr: ap, conn: c, err: err}
		}()
	}
	// finish cancels what is still running, waits for it, fires its
	// ConnectDone and closes any connection it made.
	finish := func() {
		cancelRace()
		for ; inFlight > 0; inFlight-- {
			r := <-results
			traceConnectDone(trace, r)
			if r.conn != nil {
				r.conn.Close()
			}
		}
	}

	delay := d.fallbackDelay()
	var timer *time.Timer
	var timerC <-chan time.Time
	if delay > 0 && len(order) > 1 {
		timer = time.NewTimer(delay)
		defer timer.Stop()
	}
	var firstErr error
	start()
	for {
		timerC = nil
		if timer != nil && next < len(order) {
			timerC = timer.C
		}
		select {
		case r := <-results:
			inFlight--
			traceConnectDone(trace, r)
			if r.err == nil {
				finish()
				return d.newConn(r.conn, r.addr)
			}
			if firstErr == nil {
				firstErr = r.err
			}
			if cerr := contextEnded(ctx); cerr != nil {
				finish()
				return nil, contextError(r.addr, cerr)
			}
			if next < len(order) {
				start()
				if timer != nil {
					timer.Reset(delay)
				}
			} else if inFlight == 0 {
				return nil, firstErr
			}
		case <-timerC:
			start()
			timer.Reset(delay)
		case <-ctx.Done():
			finish()
			return nil, contextError(netip.AddrPortFrom(order[0], port), ctx.Err())
		}
	}
}

// contextEnded returns ctx's error, or DeadlineExceeded when its deadline
// has passed but its timer has not fired yet (net.Dialer enforces the same
// deadline itself and may report "i/o timeout" a moment before ctx.Err()
// is set).
func contextEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func traceConnectDone(trace *httptrace.ClientTrace, r attemptResult) {
	if trace != nil && trace.ConnectDone != nil {
		trace.ConnectDone("tcp", r.addr.String(), r.err)
	}
}

// interleave orders addrs as RFC 8305 section 4 asks: the first address's
// family first, then alternating families, each family in resolver order.
func interleave(addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	first := addrs[0].Unmap().Is4()
	var primary, secondary []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() == first {
			primary = append(primary, a)
		} else {
			secondary = append(secondary, a)
		}
	}
	for i := 0; i < len(primary) || i < len(secondary); i++ {
		if i < len(primary) {
			out = append(out, primary[i])
		}
		if i < len(secondary) {
			out = append(out, secondary[i])
		}
	}
	return out
}
