package h3conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
)

// RoundTrip sends req on c and returns the response, as http.RoundTripper
// does, with resp.Request = req and resp.Proto "HTTP/3.0". The request's
// authority is req.Host or req.URL.Host, never the alternative's address.
// req is not modified. It uses a stream claimed with ReserveStream, or
// claims one.
//
// What the caller sees follows net/http's HTTP/1.1 client where quic-go's
// differs: a request body that fails to read, or whose length
// is not req.ContentLength, fails the request with that error ("http:
// ContentLength=N with Body length M") unless the response head came first;
// an error returned by the httptrace Got1xxResponse hook aborts the request
// with that error; gzip is asked for and decoded as net/http does
// (response.go).
//
// Errors:
//   - the request's context ended: the context's error (identity kept);
//   - nothing of the request was sent (c closed, GOAWAY received, no stream
//     capacity, connection lost before the headers went out): a
//     *RetryableError with Unsent set; req.Body is neither read nor closed,
//     so the caller may send req elsewhere unchanged or close it; c is no
//     longer Usable;
//   - c judged its network path dead and closed itself before the
//     response head came (Config.OnPathDead): an error wrapping
//     ErrPathDead; the server may have received the request; req.Body has
//     been closed;
//   - the server reset the stream with H3_REQUEST_REJECTED: a
//     *RetryableError with Unsent false; req.Body has been closed;
//   - the request body's read error, a body length mismatch or the
//     Got1xxResponse hook's error, as it is; req.Body has been closed;
//   - anything else (response head over MaxResponseHeaderBytes, protocol
//     errors, the connection lost mid-request) is returned as quic-go made
//     it (often an *http3.Error); req.Body has been closed.
//
// req.Cancel (the legacy channel) is not watched: the caller folds it into
// the context. Expect: 100-continue does not hold the body back (quic-go
// sends it at once).
func (c *Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	info, ok := c.acquire()
	if !ok {
		return nil, &RetryableError{Err: ErrConnUnusable, Unsent: true}
	}
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.GotConn != nil {
		info.Conn = traceConn{q: c.q}
		trace.GotConn(info)
	}

	st := &requestState{}
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody || trace != nil && trace.Got1xxResponse != nil {
		// The request may have to be aborted with an error of ours.
		ctx, st.cancel = context.WithCancelCause(ctx)
	}
	r := req.WithContext(st.traceContext(ctx, trace))
	if hasBody {
		st.body = &requestBody{rc: req.Body, st: st, limit: -1}
		if req.ContentLength > 0 {
			st.body.limit = req.ContentLength
		}
		r.Body = st.body
	}
	st.gzip = c.addHeaders(r)
	resp, err := c.cc.RoundTrip(r)
	if err == nil {
		err = st.responded()
		if err != nil {
			resp.Body.Close()
		}
	}
	if err != nil {
		st.end()
		err = c.classify(req, st, err)
		c.release() // after classify: Config.OnIdle may close c
		return nil, err
	}
	resp.Request = req
	decodeResponse(resp, req.Method, st.gzip)
	resp.Body = &responseBody{rc: resp.Body, c: c, st: st, resp: resp, declared: resp.Trailer}
	return resp, nil
}

// classify turns a quic-go RoundTrip error into ours; see RoundTrip.
func (c *Conn) classify(req *http.Request, st *requestState, err error) error {
	if ctxErr := req.Context().Err(); ctxErr != nil {
		st.closeBody()
		return ctxErr
	}
	if abort := st.abortErr(); abort != nil {
		st.closeBody()
		return abort
	}
	if !st.headers.Load() && !st.bodyTouched() {
		// quic-go could not open a stream or write the head: the
		// connection is going away (GOAWAY) or gone.
		c.dead.Store(true)
		return &RetryableError{Err: err, Unsent: true}
	}
	st.closeBody()
	if c.pathDead.Load() {
		return fmt.Errorf("%w: %w", ErrPathDead, err)
	}
	if isRequestRejected(err) {
		return &RetryableError{Err: err}
	}
	return err
}

// requestState records how far a request got: whether quic-go wrote its
// headers (the WroteHeaders hook) and whether it touched the body; and
// aborts it when the body or a hook fails before the response head came.
type requestState struct {
	headers atomic.Bool
	body    *requestBody
	gzip    bool // gzip was asked for by addHeaders: decode the response
	// cancel aborts the request (nil when nothing can abort it); called
	// with nil once the request is over.
	cancel context.CancelCauseFunc

	mu    sync.Mutex // guards abort and head
	abort error      // why the request was aborted before its response head
	head  bool       // the response head was handed to the caller
}

func (s *requestState) wroteHeaders() { s.headers.Store(true) }

// fail aborts the request with err unless its response head already came
// (then the stream's send side was reset by quic-go and the response goes
// on, as net/http's HTTP/1.1 client returns a response that came before
// its body write failed).
func (s *requestState) fail(err error) {
	s.mu.Lock()
	if !s.head && s.abort == nil {
		s.abort = err
		s.cancel(err)
	}
	s.mu.Unlock()
}

// responded records that quic-go returned the response head, or returns
// the abort error that lost the race with it.
func (s *requestState) responded() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.abort != nil {
		return s.abort
	}
	s.head = true
	return nil
}

func (s *requestState) abortErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abort
}

// end releases the request's abort context.
func (s *requestState) end() {
	if s.cancel != nil {
		s.cancel(nil)
	}
}

// traceContext returns ctx with the hooks quic-go calls for this request:
// the caller's trace (may be nil) plus WroteHeaders for st and, when the
// caller has Got1xxResponse, its error honoured and Got100Continue fired
// before it, in net/http's order. The caller's trace is
// replaced by a copy rather than composed with httptrace.WithClientTrace,
// which would call the caller's Got1xxResponse a second time.
func (s *requestState) traceContext(ctx context.Context, trace *httptrace.ClientTrace) context.Context {
	if trace == nil {
		return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: s.wroteHeaders})
	}
	ours := *trace
	if wrote := trace.WroteHeaders; wrote != nil {
		ours.WroteHeaders = func() { s.wroteHeaders(); wrote() }
	} else {
		ours.WroteHeaders = s.wroteHeaders
	}
	if got := trace.Got1xxResponse; got != nil {
		// net/http fires Got100Continue before Got1xxResponse(100);
		// quic-go the other way round, both on the goroutine reading the
		// response: Got100Continue is fired early and its second call
		// dropped.
		got100 := trace.Got100Continue
		early100 := false
		if got100 != nil {
			ours.Got100Continue = func() {
				if early100 {
					early100 = false
					return
				}
				got100()
			}
		}
		ours.Got1xxResponse = func(code int, h textproto.MIMEHeader) error {
			if code == http.StatusContinue && got100 != nil {
				got100()
				early100 = true
			}
			err := got(code, h)
			if err != nil {
				s.fail(err)
			}
			return err
		}
	}
	return traceReplaced{Context: ctx, old: trace, trace: &ours}
}

// traceReplaced is a context whose httptrace hooks are trace instead of old.
type traceReplaced struct {
	context.Context
	old, trace *httptrace.ClientTrace
}

func (c traceReplaced) Value(key any) any {
	v := c.Context.Value(key)
	if t, ok := v.(*httptrace.ClientTrace); ok && t == c.old {
		return c.trace
	}
	return v
}

func (s *requestState) bodyTouched() bool {
	return s.body != nil && s.body.touched.Load()
}

func (s *requestState) closeBody() {
	if s.body != nil {
		s.body.Close()
	}
}

// requestBody wraps the caller's body to learn whether it was read, to
// close it at most once (quic-go and the error paths may both close it),
// to fail the request when reading it fails or its length is not the
// declared one, and to end the upload once it was closed: a Read that
// begins after Close fails without reading the caller's body (whose own
// Close may not stop its Read), so quic-go resets the stream's send side,
// as x/net stops writing a body it closed.
type requestBody struct {
	rc      io.ReadCloser
	st      *requestState
	limit   int64 // req.ContentLength; -1: unknown
	n       int64 // bytes read so far (only quic-go's writer reads)
	touched atomic.Bool
	closed  atomic.Bool
	once    sync.Once
	err     error
}

// errRequestBodyClosed ends an upload whose body was closed: the response
// body was closed, or the request failed.
var errRequestBodyClosed = errors.New("h3conn: request body read after it was closed (the exchange ended)")

func (b *requestBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errRequestBodyClosed
	}
	b.touched.Store(true)
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if err == io.EOF && b.limit >= 0 && b.n != b.limit {
		err = fmt.Errorf("http: ContentLength=%d with Body length %d", b.limit, b.n)
	}
	if err != nil && err != io.EOF {
		b.st.fail(err)
	}
	return n, err
}

func (b *requestBody) Close() error {
	b.touched.Store(true)
	b.closed.Store(true)
	b.once.Do(func() { b.err = b.rc.Close() })
	return b.err
}

// responseBody gives the stream slot back when the body ends: EOF, a read
// error or Close, whichever comes first. Close may race with Read, as
// net/http allows. At EOF the trailers quic-go read go into the Trailer
// map the response was returned with, as net/http fills it.
type responseBody struct {
	rc   io.ReadCloser
	c    *Conn
	st   *requestState
	resp *http.Response
	// declared is resp.Trailer as quic-go returned it: the keys of the
	// Trailer header, nil when there was none.
	declared http.Header
	done     atomic.Bool
}

func (b *responseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		if err == io.EOF {
			b.keepTrailerMap()
		} else if b.c.pathDead.Load() {
			err = fmt.Errorf("%w: %w", ErrPathDead, err)
		}
		b.finish()
	}
	return n, err
}

// keepTrailerMap moves the trailers quic-go stored in a new map into the
// one the response was returned with (declared keys, nil values), where
// net/http puts them: a caller may hold that map. It runs on the goroutine
// that read EOF, the one quic-go set resp.Trailer on.
func (b *responseBody) keepTrailerMap() {
	declared, got := b.declared, b.resp.Trailer
	if declared == nil || got == nil {
		return
	}
	for k, v := range got {
		declared[k] = v
	}
	b.resp.Trailer = declared
}

// Close ends the exchange, as closing an HTTP/2 response body does in
// net/http: the response stream is cancelled and the request body is
// closed, which stops an upload still blocked on the caller's body (quic-go
// leaves it blocked until the caller closes that body).
func (b *responseBody) Close() error {
	err := b.rc.Close()
	b.st.closeBody()
	b.finish()
	return err
}

func (b *responseBody) finish() {
	if b.done.CompareAndSwap(false, true) {
		b.st.end()
		b.c.release()
	}
}
