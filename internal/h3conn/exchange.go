package h3conn

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
)

// What the transport adds around one HTTP/3 request that quic-go does not
// do itself: the legacy Request.Cancel channel, the deprecated
// Transport.CancelRequest (through ExchangeOwner: the transport keeps the
// registry), ResponseHeaderTimeout (started once the request is fully
// written, as for HTTP/1.1) and "Expect: 100-continue" holding the body
// back for ExpectContinueTimeout. All of them work through a context
// derived from the request's, cancelled with a cause that Send turns back
// into net/http's errors. The request is cancellable from just before it is
// sent until its response body is done or it failed.

// Exchange is one request on a Conn with those features. The transport
// embeds it in its own per-request state (one allocation for both), sets
// the exported fields and calls Send once.
type Exchange struct {
	Trace          *httptrace.ClientTrace // the caller's hooks; nil: none
	Body           io.ReadCloser          // the request body to send; nil: none
	ExpectContinue bool                   // the request asks for 100 Continue
	// HeaderTimeout is ResponseHeaderTimeout (0: none); ContinueTimeout is
	// ExpectContinueTimeout (0: the body is not held back).
	HeaderTimeout, ContinueTimeout time.Duration
	// Canceled is the error of a request cancelled by Request.Cancel or by
	// the cancel func given to the Owner; TimedOut that of one whose
	// HeaderTimeout passed: net/http's errors, which the transport owns.
	Canceled, TimedOut error
	Owner              ExchangeOwner

	parent context.Context // the request's own context
	ctx    context.Context
	cancel context.CancelCauseFunc
	gate   *continueGate

	mu          sync.Mutex // guards headTimer and headersDone
	headTimer   *time.Timer
	headersDone bool
}

// ExchangeOwner is the transport's side of an Exchange.
type ExchangeOwner interface {
	// ExchangeStarted says that req may be cancelled with cancel(cause)
	// from now until ExchangeEnded (the transport registers it for
	// CancelRequest).
	ExchangeStarted(req *http.Request, cancel context.CancelCauseFunc)
	// ExchangeEnded says the request ended: its response body was read to
	// its end or closed, or it failed. It is called once.
	ExchangeEnded()
}

// Send sends req on c (a stream is reserved for it). The response's body
// ends the exchange when it is read to its end or closed; on error the
// exchange has ended. A request cancelled or timed out just after c
// reported it unsent (*RetryableError with Unsent) has its body closed
// here, since the request ends with the exchange's error.
func (ex *Exchange) Send(c *Conn, req *http.Request) (*http.Response, error) {
	resp, err := c.RoundTrip(ex.prepare(req))
	if err != nil {
		var re *RetryableError
		if mapped := ex.err(err); mapped != err {
			if errors.As(err, &re) && re.Unsent {
				if ex.Body != nil {
					ex.Body.Close()
				} else if req.Body != nil {
					req.Body.Close()
				}
			}
			err = mapped
		}
		ex.finish()
		return nil, err
	}
	resp.Request = req
	ex.gotHeaders()
	resp.Body = &exchangeBody{rc: resp.Body, ex: ex}
	return resp, nil
}

// prepare returns the request to hand to the connection, and tells the
// Owner it may now be cancelled.
func (ex *Exchange) prepare(req *http.Request) *http.Request {
	gateBody := ex.ExpectContinue && ex.Body != nil && ex.ContinueTimeout > 0
	ex.parent = req.Context()
	ex.ctx, ex.cancel = context.WithCancelCause(ex.parent)
	ex.Owner.ExchangeStarted(req, ex.cancel)
	if req.Cancel != nil {
		go func(cancel <-chan struct{}, done <-chan struct{}) {
			select {
			case <-cancel:
				ex.cancel(ex.Canceled)
			case <-done:
			}
		}(req.Cancel, ex.ctx.Done())
	}
	ctx := ex.ctx
	if d := ex.HeaderTimeout; d > 0 || gateBody {
		// The caller's hooks with the exchange's merged in, replacing them
		// rather than composed (composition would call the exchange's
		// first): the caller's Got100Continue must run before the gate lets
		// the body go, or the body's WroteRequest can come first (net/http
		// fires Got100Continue before it writes the body).
		hooks := &httptrace.ClientTrace{}
		if ex.Trace != nil {
			*hooks = *ex.Trace
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
			ex.gate = newContinueGate(ex.Body, ex.ContinueTimeout, ex.Trace)
			got100 := hooks.Got100Continue
			hooks.Got100Continue = func() {
				if got100 != nil {
					got100()
				}
				ex.gate.release()
			}
		}
		ctx = replaceTrace(ctx, ex.Trace, hooks)
	}
	r := req.WithContext(ctx)
	if ex.gate != nil {
		r.Body = ex.gate
	}
	return r
}

func (ex *Exchange) startHeaderTimer(d time.Duration) {
	ex.mu.Lock()
	if !ex.headersDone && ex.headTimer == nil {
		ex.headTimer = time.AfterFunc(d, func() { ex.cancel(ex.TimedOut) })
	}
	ex.mu.Unlock()
}

// gotHeaders stops the header timer and tells the gate that the final
// answer came: a body still held back is not sent.
func (ex *Exchange) gotHeaders() {
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

// finish releases the derived context and tells the Owner, once the
// response body is done (or the request failed).
func (ex *Exchange) finish() {
	ex.gotHeaders()
	ex.cancel(nil)
	ex.Owner.ExchangeEnded()
}

// err turns a failure caused by one of the exchange's own cancellations,
// or by the end of the request's context, into the error net/http returns
// for it: for the context, its cause (quic-go reports a body read after
// the context ended as a stream reset).
func (ex *Exchange) err(err error) error {
	cause := context.Cause(ex.ctx)
	if cause == ex.Canceled || cause == ex.TimedOut {
		return cause
	}
	if err != io.EOF && ex.parent.Err() != nil {
		return context.Cause(ex.parent)
	}
	return err
}

// exchangeBody is the response body: it ends the exchange when it ends.
type exchangeBody struct {
	rc     io.ReadCloser
	ex     *Exchange
	once   sync.Once
	closed atomic.Bool // Close was called: Read fails as net/http's does
}

func (b *exchangeBody) Read(p []byte) (int, error) {
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

func (b *exchangeBody) Close() error {
	b.closed.Store(true)
	err := b.rc.Close()
	b.done()
	return err
}

func (b *exchangeBody) done() { b.once.Do(b.ex.finish) }

// errContinueRefused ends a held-back request body when the server gave its
// final answer without asking for it.
var errContinueRefused = errors.New("h3conn: server answered before 100 Continue; request body not sent")

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
