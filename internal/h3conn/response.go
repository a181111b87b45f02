package h3conn

import (
	"maps"
	"net/http"
	"strings"

	"github.com/ferryhttp/ferry/internal/gzipbody"
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
//   - a 204 or 304 has ContentLength 0: quic-go gave -1 without a
//     Content-Length and the header's value with one.
//   - trailers are filled into the Trailer map the response came with
//     (responseBody), not into a new map.

// DefaultUserAgent is the User-Agent sent when the request has none, in
// the form of net/http's ("Go-http-client/1.1", "Go-http-client/2.0"),
// instead of quic-go's "quic-go HTTP/3". An empty User-Agent sends none.
const DefaultUserAgent = "Go-http-client/3.0"

// Header values added to requests; quic-go only reads them.
var (
	gzipValue      = []string{"gzip"}
	userAgentValue = []string{DefaultUserAgent}
)

// The names under which addHeaders adds them: lower case, as HTTP/3 sends
// every field name, so that quic-go's encoder (which lower-cases each name
// it writes) finds nothing to convert and allocates nothing for them; the
// canonical "Accept-Encoding" cost one allocation per request for each.
// quic-go matches User-Agent in any case, and the map is quic-go's copy,
// never read with Get.
const (
	acceptEncodingKey = "accept-encoding"
	userAgentKey      = "user-agent"
)

// addHeaders adds to r what net/http adds: Accept-Encoding gzip when
// compression is not disabled and the caller set neither Accept-Encoding
// nor Range (not for HEAD), and DefaultUserAgent when the caller set no
// User-Agent. r.Header is replaced by a copy when anything is added; the
// caller's map is not touched. It reports whether gzip was asked for.
func (c *Conn) addHeaders(r *http.Request) (gzip bool) {
	gzip = !c.d.cfg.DisableCompression && r.Method != http.MethodHead &&
		r.Header.Get("Accept-Encoding") == "" && r.Header.Get("Range") == ""
	_, hasUA := r.Header["User-Agent"]
	if !gzip && hasUA {
		return false
	}
	h := make(http.Header, len(r.Header)+2)
	maps.Copy(h, r.Header)
	if gzip {
		h[acceptEncodingKey] = gzipValue
	}
	if !hasUA {
		h[userAgentKey] = userAgentValue
	}
	r.Header = h
	return gzip
}

// decodeResponse applies net/http's length and gzip rules to resp, the
// answer to a request with method; asked reports that gzip was asked for
// by addHeaders.
func decodeResponse(resp *http.Response, method string, asked bool) {
	noContent := resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	if noContent {
		// net/http: no body, whatever Content-Length says (for a 304
		// it is the representation's length); the header stays.
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
	resp.Body = gzipbody.New(resp.Body)
}
