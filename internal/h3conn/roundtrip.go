package h3conn

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// RoundTrip sends req on c and returns the response, as http.RoundTripper
// does, with resp.Request = req and resp.Proto "HTTP/3.0". The request's
// authority is req.Host or req.URL.Host, never the alternative's address.
// req is not modified. It uses a stream claimed with ReserveStream, or
// claims one.
//
// Errors:
//   - the request's context ended: the context's error (identity kept);
//   - nothing of the request was sent (c closed, GOAWAY received, no stream
//     capacity, connection lost before the headers went out): a
//     *RetryableError with Unsent set; req.Body is neither read nor closed,
//     so the caller may send req elsewhere unchanged or close it; c is no
//     longer Usable;
//   - the server reset the stream with H3_REQUEST_REJECTED: a
//     *RetryableError with Unsent false; req.Body has been closed;
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
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.GotConn != nil {
		info.Conn = traceConn{q: c.q}
		trace.GotConn(info)
	}

	st := &requestState{}
	r := req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: st.wroteHeaders}))
	if req.Body != nil && req.Body != http.NoBody {
		st.body = &requestBody{rc: req.Body, st: st}
		r.Body = st.body
	}
	resp, err := c.cc.RoundTrip(r)
	if err != nil {
		c.release()
		return nil, c.classify(req, st, err)
	}
	resp.Request = req
	resp.Body = &responseBody{rc: resp.Body, c: c}
	return resp, nil
}

// classify turns a quic-go RoundTrip error into ours; see RoundTrip.
func (c *Conn) classify(req *http.Request, st *requestState, err error) error {
	if ctxErr := req.Context().Err(); ctxErr != nil {
		st.closeBody()
		return ctxErr
	}
	if !st.headers.Load() && !st.bodyTouched() {
		// quic-go could not open a stream or write the head: the
		// connection is going away (GOAWAY) or gone.
		c.dead.Store(true)
		return &RetryableError{Err: err, Unsent: true}
	}
	st.closeBody()
	if isRequestRejected(err) {
		return &RetryableError{Err: err}
	}
	return err
}

// requestState records how far a request got: whether quic-go wrote its
// headers (the WroteHeaders hook) and whether it touched the body.
type requestState struct {
	headers atomic.Bool
	body    *requestBody
}

func (s *requestState) wroteHeaders() { s.headers.Store(true) }

func (s *requestState) bodyTouched() bool {
	return s.body != nil && s.body.touched.Load()
}

func (s *requestState) closeBody() {
	if s.body != nil {
		s.body.Close()
	}
}

// requestBody wraps the caller's body to learn whether it was read and to
// close it at most once (quic-go and the error paths may both close it).
type requestBody struct {
	rc      io.ReadCloser
	st      *requestState
	touched atomic.Bool
	once    sync.Once
	err     error
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.touched.Store(true)
	return b.rc.Read(p)
}

func (b *requestBody) Close() error {
	b.touched.Store(true)
	b.once.Do(func() { b.err = b.rc.Close() })
	return b.err
}

// responseBody gives the stream slot back when the body ends: EOF, a read
// error or Close, whichever comes first. Close may race with Read, as
// net/http allows.
type responseBody struct {
	rc   io.ReadCloser
	c    *Conn
	done atomic.Bool
}

func (b *responseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.finish()
	}
	return n, err
}

func (b *responseBody) Close() error {
	err := b.rc.Close()
	b.finish()
	return err
}

func (b *responseBody) finish() {
	if b.done.CompareAndSwap(false, true) {
		b.c.release()
	}
}
