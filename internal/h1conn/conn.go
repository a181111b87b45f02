package h1conn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ferryhttp/ferry/internal/sockio"
)

// Conn is one HTTP/1.1 client connection. It serves one request at a
// time; the goroutine running that request owns every field not guarded by
// abortMu. Between requests it sits in its owner's pool.
type Conn struct {
	cfg      *Config
	owner    Owner
	conn     net.Conn // what pc reads and writes (a *sockio.Conn for raw socket I/O)
	tlsState *tls.ConnectionState
	br       *bufio.Reader
	bw       *bufio.Writer
	nwrite   int64 // bytes written to conn
	reused   bool  // a request completed on it before
	closed   bool  // Close or CloseAndRelease ran

	hdrEstimate int // moving average of response header counts, x16

	// abortMu guards gen and abortErr: the state another goroutine (context
	// expiry, Request.Cancel, CancelRequest, Body.Close) touches to abort
	// the request in flight. Nothing blocking runs under it
	// (SetDeadline only updates the runtime poller).
	abortMu  sync.Mutex
	gen      uint64 // request generation; an abort for an older one is ignored
	abortErr error
	// headPending, writerDL and asyncWriteErr are shared with the body
	// writer goroutine of a streaming request.
	headPending   bool  // the response head is still awaited
	writerDL      bool  // the writer armed ResponseHeaderTimeout
	asyncWriteErr error // the writer's failure, if any
	// bodyStopped: the exchange failed and closes the request body under
	// the writer; a Read error of the body after that is not the caller's.
	bodyStopped bool

	// The request in flight (owned by its goroutine).
	req        *http.Request
	trace      *httptrace.ClientTrace
	closeAfter bool          // the connection must not be reused after this request
	stopCtx    func() bool   // stops the context.AfterFunc, nil if none
	legacyStop chan struct{} // closed to stop the Request.Cancel watcher
	writeRes   chan error    // result of an asynchronous body write
	writing    bool          // an asynchronous body write has not reported
	asyncBody  io.Closer     // the body being written asynchronously
	asyncOut   *Outgoing     // the body writer's copy of the request plan, reused
	// reqBodyClosed: the current request's body has been closed. The
	// writer, the reader stopping it and RoundTrip may each want to close
	// it; CloseReqBody lets only the first, so the caller's body is closed
	// once, as net/http closes it.
	reqBodyClosed atomic.Bool
	readDL        bool // a read deadline is set

	// bodyMu guards bodyReading and bodyCloseLater, and orders a close
	// of the request body with the body writer's Reads: the body is never
	// closed while a Read of it runs (net/http closes it only from its
	// writer, after the Read returned), so a close that comes during a
	// Read (bodyCloseLater) is done as that Read returns.
	bodyMu         sync.Mutex
	bodyReading    bool
	bodyCloseLater io.Closer

	// idleRC is the socket under conn for quiet (alive_unix.go), found
	// once (idleRCKnown); nil when it cannot be reached. idleTLS: conn is
	// TLS over that socket.
	idleRC      syscall.RawConn
	idleRCKnown bool
	idleTLS     bool
	// emptyRead is quiet's non-blocking read of idleRC (made on its first
	// use), which sets socketEmpty when the socket had nothing to read.
	emptyRead   func(fd uintptr) bool
	socketEmpty bool
	// idleHidden: conn hides its socket (found with idleRC), so it is
	// read by a goroutine while idle (idlewatch.go). watching: that read
	// runs; set by the goroutine handing pc to the pool, cleared by the
	// one taking it. watchRes carries the read's error (made on the first
	// idle period, room for one).
	idleHidden bool
	watching   bool
	watchRes   chan error
	// readFilled: the last read of conn that returned bytes filled the
	// buffer it was given, so more may have been waiting behind them
	// (fitForReuse). Set by whichever goroutine reads conn (the request's,
	// a drain's or the idle watch's, which own it in turn).
	readFilled bool

	// inlineMax is the most bytes (head and body) a request writes inline
	// on this connection, from its socket's send buffer (inlinebound.go);
	// read once, when inlineKnown is first set.
	inlineMax   int64
	inlineKnown bool
	// inlineQueue reads the send queue of the socket under the connection
	// (TLS unwrapped), made by inlineBound; nil when unreachable.
	inlineQueue *sendQueue
	// bodySent: a request on this connection has sent a body, whose bytes
	// may still wait in the socket's send queue (an early answer): the
	// next body goes inline only once that queue is found empty.
	bodySent bool
}

// aLongTimeAgo is a deadline in the past: setting it makes pending and
// future I/O on a connection fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// Init readies pc, the zero Conn inside its owner, to carry requests on
// conn: owner is told of its returns to the pool, its closing and its
// requests' CancelRequest registrations; cfg is shared by the owner's other
// connections. tlsState is conn's TLS state, nil for cleartext.
func (pc *Conn) Init(cfg *Config, owner Owner, conn net.Conn, tlsState *tls.ConnectionState) {
	pc.cfg, pc.owner, pc.conn, pc.tlsState = cfg, owner, conn, tlsState
	pc.br = bufio.NewReaderSize(connReader{pc}, cfg.readBufferSize())
	if _, ok := conn.(io.ReaderFrom); ok {
		pc.bw = bufio.NewWriterSize(connReaderFromWriter{connWriter{pc}}, cfg.writeBufferSize())
	} else {
		pc.bw = bufio.NewWriterSize(connWriter{pc}, cfg.writeBufferSize())
	}
	pc.hdrEstimate = int(cfg.HeaderEstimate.Load())
}

// NetConn returns the network connection under pc as it was dialled: the
// *net.TCPConn when pc reads and writes it through a *sockio.Conn. It is
// what httptrace's GotConn reports, as net/http reports the dialled
// connection.
func (pc *Conn) NetConn() net.Conn { return sockio.Unwrap(pc.conn) }

// IOConn returns the connection pc reads and writes.
func (pc *Conn) IOConn() net.Conn { return pc.conn }

// Reused reports whether a request completed on pc before.
func (pc *Conn) Reused() bool { return pc.reused }

// connReader and connWriter give the bufio reader and writer the raw
// connection, counting bytes written (to tell "nothing written" apart) and
// noting whether a read filled its buffer (readFilled): one that did not
// emptied the socket, so whatever is there later came after it.
type connReader struct{ pc *Conn }

func (r connReader) Read(p []byte) (int, error) {
	n, err := r.pc.conn.Read(p)
	if n > 0 {
		r.pc.readFilled = n == len(p)
	}
	return n, err
}

type connWriter struct{ pc *Conn }

func (w connWriter) Write(p []byte) (int, error) {
	n, err := w.pc.conn.Write(p)
	w.pc.nwrite += int64(n)
	return n, err
}

// connReaderFromWriter lets large request bodies reach the connection's
// own ReadFrom (one big write, or sendfile/splice) once the head is flushed,
// as net/http does; used only when the connection has one (TCP, not TLS).
type connReaderFromWriter struct{ connWriter }

func (w connReaderFromWriter) ReadFrom(r io.Reader) (int64, error) {
	n, err := w.pc.conn.(io.ReaderFrom).ReadFrom(r)
	w.pc.nwrite += n
	return n, err
}

// Close closes the network connection. The pool calls it for idle
// connections it discards (and then frees the slot itself).
func (pc *Conn) Close() error {
	if !pc.closed {
		pc.owner.Closed(false)
	}
	pc.closed = true
	return pc.conn.Close()
}

// CloseAndRelease closes a connection that is out of the pool and frees its
// pool slot (Owner.Closed). It runs at most once.
func (pc *Conn) CloseAndRelease() error {
	if pc.closed {
		return nil
	}
	pc.closed = true
	err := pc.conn.Close()
	pc.owner.Closed(true)
	return err
}

// Abort makes the request of generation gen fail with err: I/O in progress
// or to come returns at once. Safe from any goroutine.
func (pc *Conn) Abort(gen uint64, err error) {
	pc.abortMu.Lock()
	defer pc.abortMu.Unlock()
	if gen != pc.gen || pc.abortErr != nil {
		return
	}
	pc.abortErr = err
	pc.conn.SetDeadline(aLongTimeAgo)
}

// interruptIO unblocks the I/O of the current request without recording an
// error (Body.Close during a Read).
func (pc *Conn) interruptIO() {
	pc.abortMu.Lock()
	pc.conn.SetDeadline(aLongTimeAgo)
	pc.abortMu.Unlock()
}

// Aborted returns the abort error of the current request, if any.
func (pc *Conn) Aborted() error {
	pc.abortMu.Lock()
	err := pc.abortErr
	pc.abortMu.Unlock()
	return err
}

// mapReadError turns an I/O error into the error the caller sees: the
// abort reason (the context's error) wins over the I/O error it caused.
func (pc *Conn) mapReadError(err error) error {
	if aerr := pc.Aborted(); aerr != nil {
		return aerr
	}
	return err
}

// StartRequest binds req to the connection and arms cancellation: a
// context.AfterFunc when the context can be cancelled (none for
// context.Background), a goroutine only for the legacy Request.Cancel, and
// the owner's CancelRequest registration (Owner.WatchCancel).
func (pc *Conn) StartRequest(ctx context.Context, req *http.Request, trace *httptrace.ClientTrace) {
	pc.req = req
	pc.trace = trace
	pc.closeAfter = false
	pc.reqBodyClosed.Store(false)
	pc.abortMu.Lock()
	gen := pc.gen
	pc.abortMu.Unlock()
	if ctx.Done() != nil {
		pc.stopCtx = context.AfterFunc(ctx, func() { pc.Abort(gen, context.Cause(ctx)) })
	}
	if req.Cancel != nil {
		stop := make(chan struct{})
		pc.legacyStop = stop
		go func(cancel <-chan struct{}) {
			select {
			case <-cancel:
				pc.Abort(gen, ErrRequestCanceled)
			case <-stop:
			}
		}(req.Cancel)
	}
	pc.owner.WatchCancel(req, gen)
}

// disarmCancel stops watching the request's context, its legacy Cancel
// channel and its CancelRequest registration. The caller then bumps pc.gen
// under abortMu so a cancellation that raced it is ignored.
func (pc *Conn) disarmCancel() {
	if pc.stopCtx != nil {
		pc.stopCtx()
		pc.stopCtx = nil
	}
	if pc.legacyStop != nil {
		close(pc.legacyStop)
		pc.legacyStop = nil
	}
	pc.owner.UnwatchCancel()
}

// finish ends the request in flight: cancellation is disarmed, and the
// connection goes back to the pool when reusable (and nothing aborted it),
// otherwise it is closed. It runs exactly once per request.
func (pc *Conn) finish(reusable bool) {
	pc.disarmCancel()
	pc.abortMu.Lock()
	pc.gen++
	aborted := pc.abortErr != nil
	pc.abortErr = nil
	pc.abortMu.Unlock()

	if pc.br.Buffered() > 0 {
		// Bytes past the end of the response (a body on a HEAD or 204
		// answer, more than Content-Length) are no answer to the next
		// request: net/http closes a connection that receives anything
		// while idle.
		reusable = false
	}
	keep := reusable && !aborted && !pc.closeAfter && !pc.closed
	if pc.writing {
		// Only a connection that would be kept waits for the writer, as
		// in net/http; one that closes anyway stops it at once.
		if keep {
			keep = pc.writeDone()
		} else {
			pc.stopWriter()
		}
	}
	trace := pc.trace
	pc.req, pc.trace = nil, nil
	if !keep {
		pc.CloseAndRelease()
		return
	}
	if pc.readDL {
		pc.conn.SetReadDeadline(time.Time{})
		pc.readDL = false
	}
	pc.reused = true
	if pc.cfg.DisableKeepAlives {
		pc.CloseAndRelease()
		return
	}
	err := pc.putIdle()
	if trace != nil && trace.PutIdleConn != nil {
		trace.PutIdleConn(err)
	}
}

// putIdle hands the reusable connection back to its owner's pool, watching
// it while idle first.
func (pc *Conn) putIdle() error {
	pc.watchIdle()
	return pc.owner.PutIdle()
}

// maxWriteWait is how long the end of a response waits for the request
// body's writer before the connection is given up, as net/http waits
// (maxWriteWaitBeforeConnReuse): a server may answer before it has read
// the whole body and read the rest after, or the writer may simply not
// have reported yet.
const maxWriteWait = 50 * time.Millisecond

// writeDone reports whether the asynchronous body write has finished
// successfully. The writer has usually written everything by the time the
// whole response arrived, so it first gets one chance to be scheduled, then
// up to maxWriteWait. When it gives up, the writer is stopped.
func (pc *Conn) writeDone() bool {
	select {
	case err := <-pc.writeRes:
		pc.writing = false
		return err == nil
	default:
	}
	yieldProcessor()
	select {
	case err := <-pc.writeRes:
		pc.writing = false
		return err == nil
	default:
	}
	if hook := pc.cfg.WriteWaited; hook != nil {
		hook()
	}
	wait := time.NewTimer(maxWriteWait)
	defer wait.Stop()
	select {
	case err := <-pc.writeRes:
		pc.writing = false
		return err == nil
	case <-wait.C:
	}
	pc.stopWriter()
	return false
}

// stopWriter ends a body write the connection will not wait for (a body
// the server did not wait for): the connection is closed after it, and
// closing the body unblocks a writer waiting on the caller.
func (pc *Conn) stopWriter() {
	select {
	case <-pc.writeRes:
		pc.writing = false // it had finished
		return
	default:
	}
	if pc.asyncBody != nil {
		pc.CloseReqBody(pc.asyncBody)
	}
}

// CloseReqBody closes the current request's body unless it was closed
// already, and returns Close's error (nil when it did not close it).
// While the body writer is inside a Read of the body, the close is left
// to the writer, which does it as the Read returns (and reads no more).
func (pc *Conn) CloseReqBody(body io.Closer) error {
	if body == nil {
		return nil
	}
	pc.bodyMu.Lock()
	if pc.bodyReading {
		pc.bodyCloseLater = body
		pc.bodyMu.Unlock()
		return nil
	}
	first := pc.reqBodyClosed.CompareAndSwap(false, true)
	pc.bodyMu.Unlock()
	if !first {
		return nil
	}
	return body.Close()
}

// GiveBack returns to the pool a connection that a request obtained but
// will not use (it was cancelled meanwhile). It counts as reused from now
// on: a request that finds it dead is retried under the rules for reused
// connections.
func (pc *Conn) GiveBack() {
	if pc.cfg.DisableKeepAlives {
		pc.CloseAndRelease()
		return
	}
	pc.reused = true
	pc.putIdle()
}

// closeReqBodyNow is CloseReqBody for an exchange that failed: the body is
// closed at once, even under the writer's Read, as net/http's RoundTrip
// closes it after a failed exchange, so a body that waits for the response
// (a pipe fed after it) is unblocked and the exchange can wait for its
// writer.
func (pc *Conn) closeReqBodyNow(body io.Closer) {
	if body == nil {
		return
	}
	pc.bodyMu.Lock()
	pc.bodyCloseLater = nil
	first := pc.reqBodyClosed.CompareAndSwap(false, true)
	pc.bodyMu.Unlock()
	if first {
		body.Close()
	}
}

// errReqBodyStopped is what the body writer's Read returns once the body
// was closed under it (the exchange ended without waiting for the body).
var errReqBodyStopped = errors.New("ferry/transport: request body closed while it was sent")

// readReqBody is r.Read for the body writer: it does not start once the
// request body is closed (or a close waits), and a close that came while
// it ran is done when it returns.
func (pc *Conn) readReqBody(r io.Reader, p []byte) (int, error) {
	pc.bodyMu.Lock()
	if pc.reqBodyClosed.Load() || pc.bodyCloseLater != nil {
		pc.bodyMu.Unlock()
		return 0, errReqBodyStopped
	}
	pc.bodyReading = true
	pc.bodyMu.Unlock()
	n, err := r.Read(p)
	pc.bodyMu.Lock()
	pc.bodyReading = false
	later := pc.bodyCloseLater
	pc.bodyCloseLater = nil
	first := later != nil && pc.reqBodyClosed.CompareAndSwap(false, true)
	pc.bodyMu.Unlock()
	if first {
		later.Close()
		if err == nil || err == io.EOF {
			err = errReqBodyStopped
		}
	}
	return n, err
}
