package transport

import (
	"compress/gzip"
	"errors"
	"io"
	"sync"
)

// Transparent gzip: when the transport added "Accept-Encoding: gzip" itself
// and the response says "Content-Encoding: gzip", resp.Body decodes. The
// gzip.Reader (about 40 KiB of tables) is created on the first Read, not
// when the response arrives, and comes from a pool: it goes back when the
// stream ends or the body is closed.

var gzipReaderPool sync.Pool // of *gzip.Reader

// errConcurrentGzipRead is net/http's error for a Read of a decompressed
// body while another Read is in progress.
var errConcurrentGzipRead = errors.New("http: concurrent read on response body")

// gzipBody decodes the gzip stream of body.
type gzipBody struct {
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

func (g *gzipBody) Read(p []byte) (int, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return 0, errReadOnClosedBody
	}
	if g.err != nil {
		err := g.err
		g.mu.Unlock()
		return 0, err
	}
	if g.busy {
		// The decoder is in use by a Read in progress: net/http's error.
		g.mu.Unlock()
		return 0, errConcurrentGzipRead
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
		return n, errReadOnClosedBody
	}
	return n, err
}

// open starts decoding: a pooled gzip.Reader reset on the body.
func (g *gzipBody) open() error {
	if z, ok := gzipReaderPool.Get().(*gzip.Reader); ok {
		if err := z.Reset(g.body); err != nil {
			gzipReaderPool.Put(z)
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
func (g *gzipBody) recycleLocked() {
	if g.zr != nil && !g.busy {
		gzipReaderPool.Put(g.zr)
		g.zr = nil
	}
}

func (g *gzipBody) Close() error {
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
