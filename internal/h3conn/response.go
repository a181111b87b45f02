package h3conn

import (
	"compress/gzip"
	"io"
	"maps"
	"net/http"
	"strings"
)

// Where quic-go's client answers differently from net/http's, the
// response is made to look like net/http's HTTP/1.1 one:
//
//   - gzip is asked for and decoded here, not by quic-go (whose Dialer
//     ClientConns have DisableCompression set): net/http decodes only a
//     response that has a body (not HEAD, 204, 304 or Content-Length 0),
//     and matches "gzip" in any case. quic-go decoded an empty 204 or 304
//     too, dropping its Content-Encoding and Content-Length, and left a
//     "GZIP" body encoded.
//   - a 204 or 304 without Content-Length has ContentLength 0, not -1.
//   - trailers are filled into the Trailer map the response came with
//     (responseBody), not into a new map.

// gzipValue is the Accept-Encoding value added to requests; quic-go only
// reads it.
var gzipValue = []string{"gzip"}

// addGzip asks for gzip on r's behalf when net/http would (compression
// not disabled, not HEAD, no Accept-Encoding or Range from the caller)
// and reports whether it did. r.Header is replaced by a copy; the caller's
// map is not touched.
func (c *Conn) addGzip(r *http.Request) bool {
	if c.d.cfg.DisableCompression || r.Method == http.MethodHead ||
		r.Header.Get("Accept-Encoding") != "" || r.Header.Get("Range") != "" {
		return false
	}
	h := make(http.Header, len(r.Header)+1)
	maps.Copy(h, r.Header)
	h["Accept-Encoding"] = gzipValue
	r.Header = h
	return true
}

// decodeResponse applies net/http's length and gzip rules to resp, the
// answer to a request with method; asked reports that gzip was asked for
// by addGzip.
func decodeResponse(resp *http.Response, method string, asked bool) {
	noContent := resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	if noContent && resp.ContentLength < 0 {
		resp.ContentLength = 0
	}
	if !asked || noContent || method == http.MethodHead || resp.ContentLength == 0 ||
		!strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		return
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	resp.Body = &gzipBody{body: resp.Body}
}

// gzipBody decodes a gzip response body, creating the decoder on the
// first Read. Errors are sticky.
type gzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.zr == nil {
		g.zr, g.err = gzip.NewReader(g.body)
		if g.err != nil {
			return 0, g.err
		}
	}
	n, err := g.zr.Read(p)
	if err != nil {
		g.err = err
	}
	return n, err
}

func (g *gzipBody) Close() error { return g.body.Close() }
