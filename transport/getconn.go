package transport

import (
	"context"
	"errors"
	"net/http/httptrace"

	"github.com/ferryhttp/ferry/internal/idlepool"
)

// Getting a connection for a key: the pool first (an idle connection costs
// no DNS, no dial, no setsockopt), then a dial with the slot the pool
// reserved. For a key that is not h1Only a shared (HTTP/2) connection with
// a free stream is asked for first (idlepool.GetShared), and
// idlepool.ErrSharedAvailable from Acquire means "ask again" (a shared
// connection was added, or with MaxConnsPerHost one of its streams freed);
// an idlepool.Turn carries the request's place in line across those asks.
// The dial for such a key is coalesced with concurrent ones (dialAny, h2.go).

// getConn returns a connection for key, firing GetConn and, for an
// HTTP/1 connection, GotConn: an exclusive *h1Conn, or a shared connection
// with a stream reserved (whose RoundTrip fires GotConn itself).
func (t *Transport) getConn(ctx context.Context, o *outgoing, key connKey, ds *dialState) (*h1Conn, sharedConn, error) {
	trace := o.trace
	// A request wants connections kept again (net/http: queueForIdleConn
	// undoes CloseIdleConnections' closeIdle).
	if t.closeIdle.Load() {
		t.closeIdle.Store(false)
	}
	if o.getConnFired {
		o.getConnFired = false // a retry is a new attempt: it fires again
	} else if trace != nil && trace.GetConn != nil {
		trace.GetConn(ds.firstHop(key))
	}
	// turn keeps this request's place between looking for a stream and
	// waiting, so a stream freed in between is not missed (shared keys).
	var turn idlepool.Turn
	var tp *idlepool.Turn
	if !key.h1Only {
		tp = &turn
	}
	// The key is hashed once per request; an h1Conn keeps its own copy
	// (newH1Conn) for the Put that returns it to the pool.
	kh := t.pool.Hash(key)
	for {
		if tp != nil {
			if s, ok := t.pool.GetSharedTurnHashed(key, kh, tp); ok {
				return nil, s.(sharedConn), nil
			}
		}
		pc, idleFor, reused, err := t.pool.AcquireTurnHashed(ctx, key, kh, tp)
		if err != nil {
			if errors.Is(err, idlepool.ErrSharedAvailable) {
				continue
			}
			if ctx.Err() != nil {
				return nil, nil, context.Cause(ctx)
			}
			return nil, nil, err
		}
		if reused {
			// A request that could not be retried is not risked on a
			// connection that may have died while idle.
			if idleFor > 0 && !isReplayable(o.req) && !pc.alive() {
				pc.closeAndRelease()
				continue
			}
			if trace != nil && trace.GotConn != nil {
				trace.GotConn(httptrace.GotConnInfo{Conn: pc.conn, Reused: true, WasIdle: idleFor > 0, IdleTime: idleFor})
			}
			return pc, nil, nil
		}
		pc, sc, again, err := t.dialAny(ctx, key, ds)
		if again {
			continue
		}
		if err != nil {
			t.stats.countDialError()
			t.pool.Release(key)
			if ctx.Err() != nil {
				return nil, nil, context.Cause(ctx)
			}
			return nil, nil, err
		}
		t.stats.countDial(sc == nil)
		if sc != nil {
			return nil, sc, nil
		}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: pc.conn})
		}
		return pc, nil, nil
	}
}
