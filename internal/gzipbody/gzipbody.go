// Package gzipbody decodes a gzip response body as net/http's transparent
// decompression does, for ferry's HTTP/1.1 and HTTP/3 clients alike. The
// gzip.Reader (about 40 KiB of tables) is created on the first Read, not
// when the response arrives, and comes from a pool: it goes back when the
// stream ends or the body is closed. Read after Close, and a Read while
// another is in progress, fail with net/http's errors; errors are sticky.
package gzipbody

import (
	"compress/gzip"
	"errors"
	"io"
	"sync"
)

// ErrReadAfterClose is net/http's error for a Read of a response body that
// was closed.
var ErrReadAfterClose = errors.New("http: read on closed response body")

// ErrConcurrentRead is net/http's error for a Read of a decompressed body
// while another Read is in progress.
var ErrConcurrentRead = errors.New("http: concurrent read on response body")

var readerPool sync.Pool // of *gzip.Reader

// New returns a body that decodes body's gzip stream; closing it closes
// body.
func New(body io.ReadCloser) *Body { return &Body{body: body} }

// Body decodes the gzip stream of the body it wraps (New).
type Body struct {
	body io.ReadCloser
	// mu guards zr, err, closed and busy: a Close may run while a Read is
	// blocked in the underlying body, so Close only closes the body and
	// marks the state; the gzip reader is recycled by whichever side sees
	// it last.
	mu     sync.Mutex
	zr     *gzip.Reader
	err    error // sticky
	closed bool
	busy   bool // a Read is using zr
}

func (g *Body) Read(p []byte) (int, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return 0, ErrReadAfterClose
	}
	if g.err != nil {
		err := g.err
		g.mu.Unlock()
		return 0, err
	}
	if g.busy {
		// The decoder is in use by a Read in progress: net/http's error.
		g.mu.Unlock()
		return 0, ErrConcurrentRead
	}
	g.busy = true
	g.mu.Unlock()

	var n int
	var err error
	if g.zr == nil {
		err = g.open()
	}
	if err == nil {
		n, err = g.zr.Read(p)
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = false
	if err != nil {
		g.err = err
		g.recycleLocked()
	}
	if g.closed {
		g.recycleLocked()
		if err == nil || err == io.EOF {
			return n, nil
		}
		return n, ErrReadAfterClose
	}
	return n, err
}

// open starts decoding: a pooled gzip.Reader reset on the body.
func (g *Body) open() error {
	if z, ok := readerPool.Get().(*gzip.Reader); ok {
		if err := z.Reset(g.body); err != nil {
			readerPool.Put(z)
			return err
		}
		g.zr = z
		return nil
	}
	z, err := gzip.NewReader(g.body)
	if err != nil {
		return err
	}
	g.zr = z
	return nil
}

// recycleLocked returns the gzip reader to the pool once nothing uses it.
func (g *Body) recycleLocked() {
	if g.zr != nil && !g.busy {
		readerPool.Put(g.zr)
		g.zr = nil
	}
}

func (g *Body) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.recycleLocked()
	g.mu.Unlock()
	return g.body.Close()
}
