package h2conn

import (
	"compress/gzip"
	"io"
)

// gzipBody decompresses a response that came gzipped because the own
// connection asked for it (transparent compression, as net/http). The
// gzip reader is made on the first Read, so a body closed unread costs
// nothing.
type gzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error // sticky: the gzip header was bad
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.zr == nil {
		zr, err := gzip.NewReader(g.body)
		if err != nil {
			g.err = err
			return 0, err
		}
		g.zr = zr
	}
	return g.zr.Read(p)
}

func (g *gzipBody) Close() error { return g.body.Close() }
