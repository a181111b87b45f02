package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhttp/ferry/internal/gzipbody"
	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/h3conn"
)

// What the transport adds around one HTTP/3 request that quic-go does not do
// itself: the legacy Request.Cancel channel, the deprecated
// Transport.CancelRequest (which reaches HTTP/3 requests as it reaches
// HTTP/1.1 ones: HTTP/3 replaced one of those transparently),
// ResponseHeaderTimeout (started once the request is fully written, as for
// HTTP/1.1) and "Expect: 100-continue" holding the body back for
// ExpectContinueTimeout. All of them work through a context derived from
// the request's, cancelled with a cause that RoundTrip turns back into
// net/http's errors. The request is in the CancelRequest registry from just
// before it is sent until its response body is done or it failed.

// h3Exchange is the per-request state of those features.
type h3Exchange struct {
	parent context.Context // the request's own context
	ctx    context.Context
	cancel context.CancelCauseFunc
	gate   *continueGate
	reg    *cancelRegistry // where entry is registered for CancelRequest
	entry  cancelEntry     // the caller's request and ex.cancel
	// slot, with MaxConnsPerHost only, lets the connection give its slot
	// up when the request ends (maxconns.go).
	slot *h3ExchangeSlot

	mu          sync.Mutex // guards headTimer and headersDone
	headTimer   *time.Timer
	headersDone bool
}

// prepareH3 returns the request to hand to the HTTP/3 connection and the
// exchange state, registered for CancelRequest; the caller must end it
// with finish (directly, or through the response body).
func (t *Transport) prepareH3(req *http.Request, o *h1conn.Outgoing) (*http.Request, *h3Exchange) {
	gateBody := o.ExpectContinue && o.Body != nil && t.ExpectContinueTimeout > 0
	ex := &h3Exchange{reg: &t.cancels, parent: req.Context()}
	ex.ctx, ex.cancel = context.WithCancelCause(req.Context())
	ex.entry = cancelEntry{req: req, stop: ex.cancel}
	ex.reg.register(&ex.entry)
	if req.Cancel != nil {
		go func(cancel <-chan struct{}, done <-chan struct{}) {
			select {
			case <-cancel:
				ex.cancel(errRequestCanceled)
			case <-done:
			}
		}(req.Cancel, ex.ctx.Done())
	}
	ctx := ex.ctx
	if d := t.ResponseHeaderTimeout; d > 0 || gateBody {
		// The caller's hooks with ferry's merged in, replacing them rather
		// than composed (composition would call ferry's first): the
		// caller's Got100Continue must run before the gate lets the body
		// go, or the body's WroteRequest can come first (net/http fires
		// Got100Continue before it writes the body).
		hooks := &httptrace.ClientTrace{}
		if o.Trace != nil {
			*hooks = *o.Trace
		}
		if d > 0 {
			wrote := hooks.WroteRequest
			hooks.WroteRequest = func(info httptrace.WroteRequestInfo) {
				ex.startHeaderTimer(d)
				if wrote != nil {
					wrote(info)
				}
			}
		}
		if gateBody {
			ex.gate = newContinueGate(o.Body, t.ExpectContinueTimeout, o.Trace)
			got100 := hooks.Got100Continue
			hooks.Got100Continue = func() {
				if got100 != nil {
					got100()
				}
				ex.gate.release()
			}
		}
		ctx = h3conn.ReplaceTrace(ctx, o.Trace, hooks)
	}
	r := req.WithContext(ctx)
	if ex.gate != nil {
		r.Body = ex.gate
	}
	return r, ex
}

func (ex *h3Exchange) startHeaderTimer(d time.Duration) {
	ex.mu.Lock()
	if !ex.headersDone && ex.headTimer == nil {
		ex.headTimer = time.AfterFunc(d, func() { ex.cancel(errHeaderTimeout) })
	}
	ex.mu.Unlock()
}

// gotHeaders stops the header timer and tells the gate that the final
// answer came: a body still held back is not sent.
func (ex *h3Exchange) gotHeaders() {
	ex.mu.Lock()
	ex.headersDone = true
	if ex.headTimer != nil {
		ex.headTimer.Stop()
	}
	ex.mu.Unlock()
	if ex.gate != nil {
		ex.gate.refuse()
	}
}

// finish releases the derived context and the CancelRequest registration
// once the response body is done (or the request failed).
func (ex *h3Exchange) finish() {
	ex.reg.unregister(&ex.entry)
	ex.gotHeaders()
	ex.cancel(nil)
	if ex.slot != nil {
		ex.slot.quicStreamDone()
	}
}

// err turns a failure caused by one of the exchange's own cancellations,
// or by the end of the request's context, into the error net/http returns
// for it: for the context, its cause (quic-go reports a body read after
// the context ended as a stream reset).
func (ex *h3Exchange) err(err error) error {
	cause := context.Cause(ex.ctx)
	if cause == errRequestCanceled || cause == errHeaderTimeout {
		return cause
	}
	if err != io.EOF && ex.parent.Err() != nil {
		return context.Cause(ex.parent)
	}
	return err
}

// wrapBody makes the response body release the exchange when it ends.
func (ex *h3Exchange) wrapBody(rc io.ReadCloser) io.ReadCloser {
	return &h3ExchangeBody{rc: rc, ex: ex}
}

type h3ExchangeBody struct {
	rc     io.ReadCloser
	ex     *h3Exchange
	once   sync.Once
	closed atomic.Bool // Close was called: Read fails as net/http's does
}

func (b *h3ExchangeBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, gzipbody.ErrReadAfterClose
	}
	n, err := b.rc.Read(p)
	if err != nil {
		err = b.ex.err(err)
		if err == io.EOF {
			b.done()
		}
	}
	return n, err
}

func (b *h3ExchangeBody) Close() error {
	b.closed.Store(true)
	err := b.rc.Close()
	b.done()
	return err
}

func (b *h3ExchangeBody) done() { b.once.Do(b.ex.finish) }

// errContinueRefused ends a held-back request body when the server gave its
// final answer without asking for it.
var errContinueRefused = errors.New("ferry/transport: server answered before 100 Continue; request body not sent")

// continueGate holds a request body back until the server sends 100
// Continue, ExpectContinueTimeout passes, or the final answer arrives (then
// the body is not sent and its stream half is reset).
type continueGate struct {
	rc      io.ReadCloser
	timeout time.Duration
	trace   *httptrace.ClientTrace
	open    chan struct{}

	mu      sync.Mutex // guards decided and refused
	decided bool
	refused bool
	waited  bool // first Read seen; only the sending goroutine touches it
}

func newContinueGate(rc io.ReadCloser, timeout time.Duration, trace *httptrace.ClientTrace) *continueGate {
	return &continueGate{rc: rc, timeout: timeout, trace: trace, open: make(chan struct{})}
}

func (g *continueGate) decide(refuse bool) {
	g.mu.Lock()
	if !g.decided {
		g.decided, g.refused = true, refuse
		close(g.open)
	}
	g.mu.Unlock()
}

func (g *continueGate) release() { g.decide(false) }
func (g *continueGate) refuse()  { g.decide(true) }

func (g *continueGate) Read(p []byte) (int, error) {
	if !g.waited {
		g.waited = true
		if g.trace != nil && g.trace.Wait100Continue != nil {
			g.trace.Wait100Continue()
		}
		timer := time.AfterFunc(g.timeout, g.release)
		<-g.open
		timer.Stop()
	}
	g.mu.Lock()
	refused := g.refused
	g.mu.Unlock()
	if refused {
		return 0, errContinueRefused
	}
	return g.rc.Read(p)
}

func (g *continueGate) Close() error {
	g.refuse() // a Read blocked in the gate gives up
	return g.rc.Close()
}
