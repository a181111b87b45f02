package h1conn

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/ferryhttp/ferry/internal/gzipbody"
)

// The response body of an HTTP/1.1 exchange.
//
// Body reads its framing (Content-Length, chunked, until close) straight
// from the connection's bufio.Reader on the caller's goroutine. At the end
// of the body it hands the connection back (Conn.finish) before returning
// io.EOF, so a caller that starts the next request right after gets the same
// connection. Close before the end closes the connection, or, built with Go
// 1.27 or later, drains what is left in the background as net/http 1.27
// does (drain.go). Close may run concurrently with a blocked Read (a common
// way to abort one): it sets a past deadline on the connection (or the drain
// window's deadline), and the Read, when it returns, closes the connection
// (or hands the rest of the body to the drain).

var errReadOnClosedBody = gzipbody.ErrReadAfterClose

// errTrailerEOF is net/http's error for a body that ends right after its
// last chunk, before the trailer section.
var errTrailerEOF = errors.New("http: unexpected EOF reading trailer")

// copyBufPool holds 32 KiB buffers for copying request bodies.
var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// body states
const (
	bodyIdle    uint8 = iota // between reads
	bodyReading              // a Read is doing I/O
	bodyEnded                // end reached or failed: connection handed back or closed
)

// Body is a response body read from the connection: a declared length,
// chunks or everything until the connection closes. Its end (or failure,
// or an early Close) hands the connection back or closes it.
type Body struct {
	pc      *Conn
	trailer *http.Header // the response's Trailer, filled at EOF

	kind bodyKind
	// bigLength: resp.ContentLength as the caller got it is over
	// maxDrainBytes, so an early Close does not drain (set only when
	// drainOnEarlyClose).
	bigLength bool
	// dropTrailer: the body is being drained after Close, when the
	// Response belongs to the caller; trailers are read but not stored.
	dropTrailer bool
	remain      int64 // bodyLength: bytes left; bodyChunked: bytes left in chunk
	chunk       chunkState

	// mu guards state, closed, drainAfterRead and err; it is never
	// held during I/O.
	mu     sync.Mutex
	state  uint8
	closed bool // Close was called
	// drainAfterRead: Close ran during a Read and opened the drain window;
	// the Read, when it returns, hands the rest of the body to the drain.
	drainAfterRead bool
	err            error // sticky error once ended
}

// Conn returns the connection b is read from.
func (b *Body) Conn() *Conn { return b.pc }

// InRead reports whether a Read of b is doing I/O now (Close then
// interrupts it).
func (b *Body) InRead() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == bodyReading
}

// init prepares b to read a body of kind (length bytes for bodyLength).
func (b *Body) init(pc *Conn, kind bodyKind, length int64, trailer *http.Header) {
	b.pc = pc
	b.kind = kind
	b.trailer = trailer
	if kind == bodyLength {
		b.remain = length
		if drainOnEarlyClose && length > maxDrainBytes {
			b.bigLength = true
		}
	}
}

// Read implements io.Reader.
func (b *Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, errReadOnClosedBody
	}
	if b.state != bodyIdle {
		err := b.err
		b.mu.Unlock()
		if err == nil {
			err = errors.New("http: concurrent Read on response body")
		}
		return 0, err
	}
	b.state = bodyReading
	b.mu.Unlock()

	n, err := b.readFraming(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		// Close ran during the I/O: it aborted the connection (finish it),
		// or opened the drain window (drain.go).
		b.state = bodyEnded
		b.err = errReadOnClosedBody
		if drainOnEarlyClose && b.drainAfterRead {
			b.drainAfterInterruptedRead(err)
		} else {
			b.pc.finish(false)
		}
		if err == nil || err == io.EOF {
			return n, nil
		}
		return n, errReadOnClosedBody
	case err == io.EOF:
		b.state = bodyEnded
		b.err = io.EOF
		b.pc.finish(b.kind != bodyUntilClose)
		return n, io.EOF
	case err != nil:
		err = b.pc.mapReadError(err)
		b.state = bodyEnded
		b.err = err
		b.pc.finish(false)
		return n, err
	}
	b.state = bodyIdle
	return n, nil
}

// Close implements io.Closer. Closing before the end closes the
// connection; built with Go 1.27 or later, a body that may be drained is
// drained in the background instead and its connection kept if that reaches
// the end (drain.go). Close never blocks on I/O.
func (b *Body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	switch b.state {
	case bodyIdle:
		b.state = bodyEnded
		if drainOnEarlyClose && b.drainOnClose() {
			return nil
		}
		b.pc.finish(false)
	case bodyReading:
		if drainOnEarlyClose && b.mayDrain() && b.openDrainWindow() {
			b.drainAfterRead = true
			return nil
		}
		b.pc.interruptIO()
	}
	return nil
}

func (b *Body) readFraming(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	br := b.pc.br
	switch b.kind {
	case bodyLength:
		if int64(len(p)) > b.remain {
			p = p[:b.remain]
		}
		n, err := br.Read(p)
		b.remain -= int64(n)
		if b.remain == 0 {
			// Return EOF with the last bytes so the connection is reused
			// even by a caller that stops reading at Content-Length.
			return n, io.EOF
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	case bodyChunked:
		return b.readChunked(p)
	case bodyUntilClose:
		return br.Read(p)
	}
	return 0, io.EOF
}

// readChunked reads chunk data, processing chunk headers that are already
// buffered without blocking once it has data to return, and the trailer.
func (b *Body) readChunked(p []byte) (n int, err error) {
	br := b.pc.br
	for n < len(p) {
		if b.remain == 0 {
			if b.chunk.started {
				if n > 0 && br.Buffered() < 2 {
					return n, nil
				}
				if err := readChunkCRLF(br); err != nil {
					return n, err
				}
				b.chunk.started = false
			}
			if n > 0 && !chunkHeaderBuffered(br) {
				return n, nil
			}
			size, err := b.chunk.readHeader(br)
			if err != nil {
				return n, err
			}
			if size == 0 {
				if err := b.readTrailer(); err != nil {
					return n, err
				}
				return n, io.EOF
			}
			b.remain = size
			b.chunk.started = true
		}
		if n > 0 && br.Buffered() == 0 {
			return n, nil
		}
		q := p[n:]
		if int64(len(q)) > b.remain {
			q = q[:b.remain]
		}
		m, err := br.Read(q)
		n += m
		b.remain -= int64(m)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// readTrailer reads the trailer section after the last chunk and merges it
// into the response's Trailer.
func (b *Body) readTrailer() error {
	br := b.pc.br
	if peek, err := br.Peek(1); err == nil && peek[0] == '\n' {
		br.Discard(1)
		return nil
	}
	peek, err := br.Peek(2)
	if err == nil && peek[0] == '\r' && peek[1] == '\n' {
		br.Discard(2)
		return nil
	}
	if err == io.EOF {
		return errTrailerEOF
	}
	block, err := readFieldBlock(br, b.pc.cfg.MaxHeaderBytes)
	if err == io.ErrUnexpectedEOF {
		// net/http looks for the end of the section before parsing it and
		// words a section cut short as one too long.
		err = errTrailerTooLong
	}
	if err != nil {
		return err
	}
	h, _, err := parseHeaderFields(block, 4)
	if err != nil {
		return err
	}
	if b.dropTrailer {
		return nil
	}
	if *b.trailer == nil {
		*b.trailer = h
		return nil
	}
	for k, v := range h {
		(*b.trailer)[k] = v
	}
	return nil
}

// upgradeBody is resp.Body of a 101 Switching Protocols response: the
// connection itself, reading first what is buffered. Closing it closes the
// connection and frees its pool slot.
type upgradeBody struct {
	pc   *Conn
	once sync.Once
}

func (u *upgradeBody) Read(p []byte) (int, error) {
	if u.pc.br.Buffered() > 0 {
		return u.pc.br.Read(p)
	}
	return u.pc.conn.Read(p)
}

func (u *upgradeBody) Write(p []byte) (int, error) { return u.pc.conn.Write(p) }

// CloseWrite shuts down the writing side of the connection (for TCP, a
// FIN; for TLS, close_notify) when it can, as net/http's 101 body does;
// otherwise it reports http.ErrNotSupported.
func (u *upgradeBody) CloseWrite() error {
	if cw, ok := u.pc.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("CloseWrite: %w", http.ErrNotSupported)
}

func (u *upgradeBody) Close() error {
	var err error
	u.once.Do(func() { err = u.pc.CloseAndRelease() })
	return err
}
