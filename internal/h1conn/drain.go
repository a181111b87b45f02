package h1conn

import (
	"io"
	"time"
)

// Draining a response body closed before its end, as net/http does from
// Go 1.27 (drainOnEarlyClose).
//
// When Close comes before the end of an HTTP/1.1 response body whose
// connection could be reused (no "Connection: close" either way, keep-alives
// on, not a close-delimited body) and whose resp.ContentLength as the caller
// got it is at most 256 KiB (-1, unknown or transparently decompressed,
// included), Close returns at once and the rest of the body is read and
// discarded in the background: at most 256 KiB + 1 bytes, for at most 50 ms
// from Close. If that reaches the end of the body (a chunked body's trailer
// read and discarded, never stored in the caller's Response) the connection
// goes back to the pool as after a normal EOF; otherwise it is closed. Other
// bodies close their connection at once, as on Go 1.26.
//
// The 50 ms window is a read deadline on the connection, set by Close: no
// timer, no channel, and the draining goroutine ends when the deadline
// passes at the latest. From Close on, the request's cancellation (context,
// Request.Cancel, CancelRequest) no longer applies, as in net/http, where
// nothing watches the request once its body is closed: a caller that cancels
// its context right after Close keeps the connection. A drain that ends
// after CloseIdleConnections, with no request asking for a connection in
// between, closes its connection instead of pooling it (Conn.finish), as
// net/http's closeIdle flag does.
//
// Close during a blocked Read (net/http 1.27 opens the same window there,
// but its drain waits for the Read in flight): Close sets the window's
// deadline instead of a past one, so the Read stays blocked until data
// comes or the window ends. When it returns, the rest of the body goes to
// the drain (the Read got data), the connection goes back (the Read reached
// the end) or it closes (the window ended). The Read itself returns what it
// got, or errReadOnClosedBody.

// drainOnEarlyClose is true when ferry is built with Go 1.27 or later,
// whose net/http drains an early-closed body; built with Go 1.26 it is
// false and the code here is compiled out (Close closes the connection).
const drainOnEarlyClose = netHTTP127

const (
	maxDrainBytes = 256 << 10             // net/http's maxPostCloseReadBytes
	maxDrainTime  = 50 * time.Millisecond // net/http's maxPostCloseReadTime
)

// mayDrain reports whether an early Close may keep b's connection: the
// connection would be reused after a normal EOF and the length allows it.
func (b *Body) mayDrain() bool {
	pc := b.pc
	return !b.bigLength && b.kind != bodyUntilClose && !pc.closeAfter && !pc.cfg.DisableKeepAlives
}

// drainOnClose is Close between Reads (b.mu held, the caller owns the
// connection). It reports whether it took charge of the connection; false
// means the caller closes it.
func (b *Body) drainOnClose() bool {
	if !b.mayDrain() {
		return false
	}
	pc := b.pc
	if b.kind == bodyLength && b.remain <= maxDrainBytes && int64(pc.br.Buffered()) >= b.remain {
		// The rest is in the read buffer already: no I/O, no goroutine.
		// (With a large ReadBufferSize a decompressed body may have more
		// than maxDrainBytes buffered: the drain would give up on it.)
		pc.br.Discard(int(b.remain))
		b.remain = 0
		pc.finish(true)
		return true
	}
	if !b.openDrainWindow() {
		return false
	}
	go b.drain()
	return true
}

// openDrainWindow starts the drain window (b.mu held): reads on the
// connection fail maxDrainTime from now, and an abort of the request is
// ignored from now on. It fails when the request was aborted already (its
// deadline is in the past) or the connection takes no read deadline.
// Nothing here blocks: SetReadDeadline only updates the runtime poller.
func (b *Body) openDrainWindow() bool {
	pc := b.pc
	window := pc.cfg.DrainTime
	if window == 0 {
		window = maxDrainTime
	}
	pc.abortMu.Lock()
	defer pc.abortMu.Unlock()
	if pc.abortErr != nil || pc.conn.SetReadDeadline(time.Now().Add(window)) != nil {
		return false
	}
	pc.gen++ // abort(gen) of this request is now stale
	return true
}

// drainAfterInterruptedRead ends a Read during which Close opened the drain
// window (b.mu held, the Read's goroutine owns the connection); err is what
// the Read's I/O returned.
func (b *Body) drainAfterInterruptedRead(err error) {
	pc := b.pc
	switch err {
	case nil:
		go b.drain()
	case io.EOF:
		pc.readDL = true // the window's deadline, cleared when the connection is kept
		pc.finish(true)
	default:
		pc.finish(false)
	}
}

// drain runs on its own goroutine, which owns the connection from its start
// (b's fields are no longer touched by Read or Close, which see b.closed):
// it discards the rest of the body within the window, then hands the
// connection back or closes it.
func (b *Body) drain() {
	pc := b.pc
	pc.readDL = true // the window's deadline, cleared when the connection is kept
	b.dropTrailer = true
	buf := copyBufPool.Get().(*[]byte)
	ended := b.discardRest(*buf)
	copyBufPool.Put(buf)
	pc.finish(ended)
}

// discardRest reads the body into buf until its end, an error (the window's
// deadline among them) or more than maxDrainBytes, and reports whether it
// reached the end having read at most maxDrainBytes (net/http copies at most
// maxDrainBytes+1 bytes and keeps the connection only when that stops short
// at EOF).
func (b *Body) discardRest(buf []byte) bool {
	var total int64
	for {
		p := buf
		if left := maxDrainBytes + 1 - total; int64(len(p)) > left {
			p = p[:left]
		}
		n, err := b.readFraming(p)
		total += int64(n)
		switch {
		case err == io.EOF:
			return total <= maxDrainBytes
		case err != nil, total > maxDrainBytes:
			return false
		}
	}
}
