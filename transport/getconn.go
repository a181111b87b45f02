package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/h2conn"
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
//
// A request that has to wait (for a MaxConnsPerHost slot, or for another
// request's HTTP/2 dial) or dial is cancelled there as in net/http, by its
// context, Request.Cancel and CancelRequest alike (connWait). A request
// that finds a connection at once pays nothing for that.

// getConn returns a connection for key, firing GetConn and, for an
// HTTP/1 connection, GotConn: an exclusive *h1Conn, or a shared connection
// with a stream reserved (whose RoundTrip fires GotConn itself).
func (t *Transport) getConn(ctx context.Context, o *h1conn.Outgoing, key connKey, ds *dialState) (*h1Conn, sharedConn, error) {
	trace := o.Trace
	// A request wants connections kept again (net/http: queueForIdleConn
	// undoes CloseIdleConnections' closeIdle).
	if t.closeIdle.Load() {
		t.closeIdle.Store(false)
	}
	if o.GetConnFired {
		o.GetConnFired = false // a retry is a new attempt: it fires again
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
	// w is armed once the request waits in the pool (slotWait) or dials,
	// and ended (w.end, w set to nil) before getConn returns or uses a
	// connection from the pool.
	var w *connWait
	for {
		if tp != nil {
			if s, ok := t.pool.GetSharedTurnHashed(key, kh, tp); ok {
				sc := s.(sharedConn)
				if w != nil {
					if err := w.end(); err != nil {
						sc.ReleaseStream()
						return nil, nil, err
					}
				}
				return nil, sc, nil
			}
		}
		ds.leftPool = true
		actx := ctx
		var sw *slotWait
		if t.MaxConnsPerHost > 0 {
			// Acquire may wait for a slot: sw arms w only if it does (w
			// may be armed already, from an earlier wait), and lets the
			// key's idle QUIC connections give their slots up once this
			// request is queued (quicYieldSlot, maxconns.go).
			sw = slotWaits.Get().(*slotWait)
			sw.Context, sw.t, sw.req, sw.key, sw.w = ctx, t, o.Req, key, w
			actx = sw
		} else if w != nil {
			actx = w.ctx
		}
		pc, idleFor, reused, err := t.pool.AcquireTurnHashed(actx, key, kh, tp)
		if sw != nil {
			w = sw.w
			*sw = slotWait{}
			slotWaits.Put(sw)
		}
		if err != nil {
			if errors.Is(err, idlepool.ErrSharedAvailable) {
				continue
			}
			if cerr := w.end(); cerr != nil {
				return nil, nil, cerr
			}
			if ctx.Err() != nil {
				return nil, nil, context.Cause(ctx)
			}
			return nil, nil, err
		}
		if reused {
			if w != nil {
				err := w.end()
				w = nil
				if err != nil {
					t.giveBack(pc)
					return nil, nil, err
				}
			}
			if !pc.FitForReuse(o.Req, idleFor) {
				pc.CloseAndRelease()
				continue
			}
			if trace != nil && trace.GotConn != nil {
				trace.GotConn(httptrace.GotConnInfo{Conn: pc.NetConn(), Reused: true, WasIdle: idleFor > 0, IdleTime: idleFor})
			}
			return pc, nil, nil
		}
		if w == nil {
			w = t.armConnWait(ctx, o.Req)
		} else if w.ctx.Err() != nil {
			// Cancelled as the pool gave it the slot: no dial.
			t.releaseTCPSlot(key)
			return nil, nil, w.end()
		}
		pc, sc, again, err := t.dialHeld(w, key, ds)
		if again && sc == nil {
			continue // w stays armed for the next look and wait
		}
		cerr := w.end()
		w = nil
		if err != nil {
			t.stats.countDialError()
			t.releaseTCPSlot(key)
			if cerr != nil {
				return nil, nil, cerr
			}
			if ctx.Err() != nil {
				return nil, nil, context.Cause(ctx)
			}
			return nil, nil, err
		}
		if !again { // again with sc: found in the pool, no dial
			t.stats.countDial(sc == nil)
		}
		if sc != nil {
			if cerr != nil {
				sc.ReleaseStream() // the connection stays shared in the pool
				return nil, nil, cerr
			}
			return nil, sc, nil
		}
		if cerr != nil {
			t.giveBack(pc)
			return nil, nil, cerr
		}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: pc.NetConn()})
		}
		return pc, nil, nil
	}
}

// dialHeld is dialAny under w, holding the slot the pool reserved for key.
// A caller's dialer, proxy callback or TLS hook that panics would unwind
// past getConn's cleanup: the slot (MaxConnsPerHost) and w's watchers and
// CancelRequest entry are released first, and the panic goes on. (net/http
// dials on a goroutine of its own, where such a panic ends the process;
// here the caller may recover it and go on using the Transport.)
func (t *Transport) dialHeld(w *connWait, key connKey, ds *dialState) (pc *h1Conn, sc sharedConn, again bool, err error) {
	returned := false
	defer func() {
		if !returned {
			w.end()
			t.releaseTCPSlot(key)
		}
	}()
	pc, sc, again, err = t.dialAny(w, key, ds)
	returned = true
	return pc, sc, again, err
}

// slotWait is the context a request hands the pool's Acquire when
// MaxConnsPerHost may make it wait for a slot. It is the request's context
// until the pool waits, that is until Acquire calls Done: Done arms a
// connWait (w) and from then on slotWait is w.ctx. A request that finds an
// idle connection or a free slot never calls Done, arms nothing, and, as
// slotWaits are recycled, allocates nothing either. Only the goroutine
// running the request uses it.
//
// Recycling is safe only because Acquire keeps to its contract (see
// idlepool.Pool.Acquire): it does not keep ctx after it returns, derives no
// context from it, and calls Done only when it is about to wait. A context
// derived from a slotWait (context.WithCancel, AfterFunc) would start a
// goroutine that outlives the recycling; do not hand one to anything else.
// Once armed, Value is w.ctx's (so context.Cause sees w's cause); Deadline
// stays the request's, which still ends the wait through the AfterFunc.
//
// Done also runs quicYieldSlot: by then the request is queued, so a QUIC
// connection of its key that goes idle later sees it waiting
// (maxconns.go).
type slotWait struct {
	context.Context // the request's (Deadline, Value, and Err until armed)
	t               *Transport
	req             *http.Request
	key             connKey
	w               *connWait // armed by Done, or by an earlier wait
}

var slotWaits = sync.Pool{New: func() any { return new(slotWait) }}

func (s *slotWait) Done() <-chan struct{} {
	if s.w == nil {
		s.w = s.t.armConnWait(s.Context, s.req)
	}
	s.t.quicYieldSlot(s.key)
	if !s.key.h1Only && s.w.settingsTimer == nil && s.t.ResponseHeaderTimeout > 0 && s.t.settingsPending(s.key) {
		// The connection this request would take a stream of refuses
		// it only until the server's SETTINGS are known.
		s.w.startSettingsWait()
	}
	return s.w.ctx.Done()
}

func (s *slotWait) Err() error {
	if s.w != nil {
		return s.w.ctx.Err()
	}
	return s.Context.Err()
}

func (s *slotWait) Value(key any) any {
	if s.w != nil {
		return s.w.ctx.Value(key)
	}
	return s.Context.Value(key)
}

// giveBack returns to the pool an HTTP/1.1 connection that a cancelled
// request obtained but will not use, as net/http pools a connection
// dialled for a request that went away. It counts as reused from now on:
// no goroutine watches it while it is idle, so a request that finds it dead
// is retried under the rules for reused connections.
func (t *Transport) giveBack(pc *h1Conn) { pc.GiveBack() }

// connWait carries a request's cancellation signals into its wait for a
// connection and its dial, as net/http's getConn does: the request's
// context, Request.Cancel (a goroutine, only when it is set) and
// CancelRequest (an entry in the registry) each cancel ctx, under which
// the request waits and dials, until end. ctx keeps the request's values
// but not its cancellation: once end ran nothing cancels it, so a caller's
// dialer whose connection lives as long as the context it was given keeps
// that connection working in the pool after the request is gone (net/http
// never cancels its dial context after a successful dial either).
type connWait struct {
	t      *Transport
	req    *http.Request
	reqCtx context.Context
	ctx    context.Context
	stop   context.CancelCauseFunc

	stopCtx    func() bool   // stops the context.AfterFunc, nil if none
	legacyDone chan struct{} // closed by end to stop the Request.Cancel watcher
	entry      cancelEntry   // req and cancel, for CancelRequest
	// settingsTimer is ResponseHeaderTimeout's timer over the request's
	// waits for a server's SETTINGS (startSettingsWait); nil until one.
	// Only the request's goroutine touches the field.
	settingsTimer *time.Timer

	// mu guards ended and orders it with stop: no signal cancels ctx once
	// end has run.
	mu    sync.Mutex
	ended bool
}

// armConnWait starts forwarding req's cancellation signals (ctx is req's
// context) to a new connWait's ctx.
func (t *Transport) armConnWait(ctx context.Context, req *http.Request) *connWait {
	t.waitsArmed.Add(1)
	w := &connWait{t: t, req: req, reqCtx: ctx}
	w.ctx, w.stop = context.WithCancelCause(context.WithoutCancel(ctx))
	if ctx.Done() != nil {
		w.stopCtx = context.AfterFunc(ctx, func() { w.cancel(context.Cause(ctx)) })
	}
	if req.Cancel != nil {
		done := make(chan struct{})
		w.legacyDone = done
		go func(cancel <-chan struct{}) {
			select {
			case <-cancel:
				w.cancel(errRequestCanceled)
			case <-done:
			}
		}(req.Cancel)
	}
	w.entry = cancelEntry{Req: req, Stop: w.cancel}
	t.cancels.Register(&w.entry)
	return w
}

// startSettingsWait starts, once per connWait, the request's
// ResponseHeaderTimeout over its waits for an HTTP/2 server's SETTINGS:
// waits net/http does not make, since it sends a request on a new
// connection at once and starts that timeout once it is written. When it
// passes, w.ctx is cancelled with h2conn.ErrResponseHeaderTimeout, the
// error net/http's HTTP/2 client gives then (Timeout() true). It runs on
// to end: a request that waits for SETTINGS more than once is bounded from
// its first such wait on.
func (w *connWait) startSettingsWait() {
	if w == nil || w.settingsTimer != nil || w.t.ResponseHeaderTimeout <= 0 {
		return
	}
	d := w.t.ResponseHeaderTimeout
	w.settingsTimer = time.AfterFunc(d, func() { w.cancel(h2conn.ErrResponseHeaderTimeout) })
}

// cancel cancels w.ctx with cause, unless end has run.
func (w *connWait) cancel(cause error) {
	w.mu.Lock()
	if !w.ended {
		w.stop(cause)
	}
	w.mu.Unlock()
}

// end stops forwarding the signals and returns the error the request ends
// with if one of them arrived (also one that arrived just as the wait
// ended, before its watcher forwarded it): the context's cause, or for
// Request.Cancel and CancelRequest net/http's "request canceled while
// waiting for connection". It returns nil for a nil w.
func (w *connWait) end() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	w.ended = true
	cause := context.Cause(w.ctx)
	w.mu.Unlock()
	if w.stopCtx != nil {
		w.stopCtx()
	}
	if w.legacyDone != nil {
		close(w.legacyDone)
	}
	if w.settingsTimer != nil {
		w.settingsTimer.Stop()
	}
	w.t.cancels.Unregister(&w.entry)
	if cause == nil {
		if w.reqCtx.Err() != nil {
			cause = context.Cause(w.reqCtx)
		} else if w.req.Cancel != nil {
			select {
			case <-w.req.Cancel:
				cause = errRequestCanceled
			default:
			}
		}
	}
	if cause == errRequestCanceled {
		return errRequestCanceledConn
	}
	return cause
}
