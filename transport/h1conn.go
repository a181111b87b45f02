package transport

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

	"github.com/ferryhttp/ferry/internal/idlepool"
)

// h1Conn is one HTTP/1.1 client connection. It serves one request at a
// time; the goroutine running that request owns every field not guarded by
// abortMu. Between requests it sits in the pool.
type h1Conn struct {
	t         *Transport
	key       connKey
	keyHash   idlepool.KeyHash // t.pool.Hash(key), so a Put does not hash again
	statShard uint8            // the transportStats shard its requests are counted in
	conn      net.Conn
	sock      connSocket // conn's socket, for requests' socket options
	tlsState  *tls.ConnectionState
	br        *bufio.Reader
	bw        *bufio.Writer
	nwrite    int64 // bytes written to conn
	reused    bool  // a request completed on it before
	closed    bool  // closeAndRelease ran

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
	cancelReg  cancelEntry   // this request's CancelRequest registration
	writeRes   chan error    // result of an asynchronous body write
	writing    bool          // an asynchronous body write has not reported
	asyncBody  io.Closer     // the body being written asynchronously
	asyncOut   *outgoing     // the body writer's copy of the request plan, reused
	// reqBodyClosed: the current request's body has been closed. The
	// writer, the reader stopping it and RoundTrip may each want to close
	// it; closeReqBody lets only the first, so the caller's body is closed
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

func newH1Conn(t *Transport, key connKey, conn net.Conn) *h1Conn {
	pc := &h1Conn{t: t, key: key, keyHash: t.pool.Hash(key), conn: conn, statShard: newStatShard()}
	pc.sock.conn = conn
	pc.br = bufio.NewReaderSize(connReader{pc}, t.readBufferSize())
	if _, ok := conn.(io.ReaderFrom); ok {
		pc.bw = bufio.NewWriterSize(connReaderFromWriter{connWriter{pc}}, t.writeBufferSize())
	} else {
		pc.bw = bufio.NewWriterSize(connWriter{pc}, t.writeBufferSize())
	}
	pc.hdrEstimate = int(t.headerEstimate.Load())
	return pc
}

// connReader and connWriter give the bufio reader and writer the raw
// connection, counting bytes written (to tell "nothing written" apart) and
// noting whether a read filled its buffer (readFilled): one that did not
// emptied the socket, so whatever is there later came after it.
type connReader struct{ pc *h1Conn }

func (r connReader) Read(p []byte) (int, error) {
	n, err := r.pc.conn.Read(p)
	if n > 0 {
		r.pc.readFilled = n == len(p)
	}
	return n, err
}

type connWriter struct{ pc *h1Conn }

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
func (pc *h1Conn) Close() error {
	if !pc.closed {
		pc.t.stats.countH1Closed()
	}
	pc.closed = true
	return pc.conn.Close()
}

// closeAndRelease closes a connection that is out of the pool and frees its
// pool slot. It runs at most once.
func (pc *h1Conn) closeAndRelease() error {
	if pc.closed {
		return nil
	}
	pc.closed = true
	pc.t.stats.countH1Closed()
	err := pc.conn.Close()
	pc.t.releaseTCPSlot(pc.key)
	return err
}

// abort makes the request of generation gen fail with err: I/O in progress
// or to come returns at once. Safe from any goroutine.
func (pc *h1Conn) abort(gen uint64, err error) {
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
func (pc *h1Conn) interruptIO() {
	pc.abortMu.Lock()
	pc.conn.SetDeadline(aLongTimeAgo)
	pc.abortMu.Unlock()
}

// aborted returns the abort error of the current request, if any.
func (pc *h1Conn) aborted() error {
	pc.abortMu.Lock()
	err := pc.abortErr
	pc.abortMu.Unlock()
	return err
}

// mapReadError turns an I/O error into the error the caller sees: the
// abort reason (the context's error) wins over the I/O error it caused.
func (pc *h1Conn) mapReadError(err error) error {
	if aerr := pc.aborted(); aerr != nil {
		return aerr
	}
	return err
}

// startRequest binds req to the connection and arms cancellation: a
// context.AfterFunc when the context can be cancelled (none for
// context.Background), a goroutine only for the legacy Request.Cancel, and
// the CancelRequest registry.
func (pc *h1Conn) startRequest(ctx context.Context, req *http.Request, trace *httptrace.ClientTrace) {
	pc.req = req
	pc.trace = trace
	pc.closeAfter = false
	pc.reqBodyClosed.Store(false)
	pc.abortMu.Lock()
	gen := pc.gen
	pc.abortMu.Unlock()
	if ctx.Done() != nil {
		pc.stopCtx = context.AfterFunc(ctx, func() { pc.abort(gen, context.Cause(ctx)) })
	}
	if req.Cancel != nil {
		stop := make(chan struct{})
		pc.legacyStop = stop
		go func(cancel <-chan struct{}) {
			select {
			case <-cancel:
				pc.abort(gen, errRequestCanceled)
			case <-stop:
			}
		}(req.Cancel)
	}
	pc.cancelReg.req, pc.cancelReg.pc, pc.cancelReg.gen = req, pc, gen
	pc.t.cancels.register(&pc.cancelReg)
}

// disarmCancel stops watching the request's context, its legacy Cancel
// channel and its CancelRequest registration. The caller then bumps pc.gen
// under abortMu so a cancellation that raced it is ignored.
func (pc *h1Conn) disarmCancel() {
	if pc.stopCtx != nil {
		pc.stopCtx()
		pc.stopCtx = nil
	}
	if pc.legacyStop != nil {
		close(pc.legacyStop)
		pc.legacyStop = nil
	}
	pc.t.cancels.unregister(&pc.cancelReg)
}

// finish ends the request in flight: cancellation is disarmed, and the
// connection goes back to the pool when reusable (and nothing aborted it),
// otherwise it is closed. It runs exactly once per request.
func (pc *h1Conn) finish(reusable bool) {
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
		pc.closeAndRelease()
		return
	}
	if pc.readDL {
		pc.conn.SetReadDeadline(time.Time{})
		pc.readDL = false
	}
	pc.reused = true
	if pc.t.DisableKeepAlives {
		pc.closeAndRelease()
		return
	}
	err := pc.putIdle()
	if trace != nil && trace.PutIdleConn != nil {
		trace.PutIdleConn(err)
	}
}

// putIdle hands the reusable connection back: to the pool (or a request
// waiting for it), or, after CloseIdleConnections with no request asking
// since, closed unless a request waits for it (as net/http). It returns
// net/http's PutIdleConn error when the connection was closed instead.
func (pc *h1Conn) putIdle() error {
	pc.watchIdle()
	if pc.t.closeIdle.Load() {
		if pc.t.pool.HandToWaiterHashed(pc.key, pc.keyHash, pc) {
			return nil
		}
		pc.closeAndRelease()
		return errCloseIdle
	}
	kept := pc.t.pool.PutHashed(pc.key, pc.keyHash, pc)
	pc.t.tcpSlotEvent() // idle now, or closed and its slot given back
	if !kept {
		return errTooManyIdle // the pool closed it
	}
	pc.t.h3AfterTCPIdle() // idle HTTP/3 connections count against MaxIdleConns too
	// CloseIdleConnections sets closeIdle before it sweeps the pool: if it
	// is still clear here, that sweep comes after this Put and finds the
	// connection. If it is set now, the sweep may have run before the Put
	// landed: sweep again (rare; whatever is idle now would be closed
	// anyway), on a goroutine of its own: finish may run under a body's
	// lock, and closing TLS connections can block.
	if pc.t.closeIdle.Load() {
		go pc.t.pool.CloseIdle()
	}
	return nil
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
func (pc *h1Conn) writeDone() bool {
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
	if hook := pc.t.writeWaited; hook != nil {
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
func (pc *h1Conn) stopWriter() {
	select {
	case <-pc.writeRes:
		pc.writing = false // it had finished
		return
	default:
	}
	if pc.asyncBody != nil {
		pc.closeReqBody(pc.asyncBody)
	}
}

var errTooManyIdle = errors.New("http: putIdleConn: too many idle connections for host")

// errCloseIdle is net/http's PutIdleConn error for a connection closed
// because CloseIdleConnections ran while it was in use.
var errCloseIdle = errors.New("http: putIdleConn: CloseIdleConnections was called")

// closeReqBody closes the current request's body unless it was closed
// already, and returns Close's error (nil when it did not close it).
// While the body writer is inside a Read of the body, the close is left
// to the writer, which does it as the Read returns (and reads no more).
func (pc *h1Conn) closeReqBody(body io.Closer) error {
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

// closeReqBodyNow is closeReqBody for an exchange that failed: the body is
// closed at once, even under the writer's Read, as net/http's RoundTrip
// closes it after a failed exchange, so a body that waits for the response
// (a pipe fed after it) is unblocked and the exchange can wait for its
// writer.
func (pc *h1Conn) closeReqBodyNow(body io.Closer) {
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
func (pc *h1Conn) readReqBody(r io.Reader, p []byte) (int, error) {
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
