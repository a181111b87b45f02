package h1conn

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Response framing: how the body of a response is delimited, with the rules
// of RFC 9112 section 6 as net/http applies them (same errors, same header
// clean-up: Transfer-Encoding, a duplicated Content-Length, Trailer and
// "Connection: close" are removed from the header the caller sees).

// bodyKind says how a response body ends.
type bodyKind uint8

const (
	bodyNone       bodyKind = iota // no body: resp.Body is http.NoBody
	bodyLength                     // Content-Length bytes
	bodyChunked                    // chunked transfer coding
	bodyUntilClose                 // until the server closes the connection
)

// unsupportedTEError mirrors net/http's error for a transfer coding it does
// not implement.
type unsupportedTEError struct{ msg string }

func (e *unsupportedTEError) Error() string { return e.msg }

// responseFraming decides resp's framing for a request with method and sets
// ContentLength, TransferEncoding, Close and Trailer like net/http's
// readTransfer. keys says which framing keys resp.Header may hold
// (anyFramingKey when unknown). It returns the body kind and, for
// bodyLength, the length.
func responseFraming(resp *http.Response, method string, keys framingKeys) (bodyKind, int64, error) {
	h := resp.Header
	if p, ok := keys.lookup(h, hasPragma); ok && len(p) > 0 && p[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
	resp.Close = shouldCloseResponse(resp.ProtoMajor, resp.ProtoMinor, h, keys)

	chunked := false
	if te, ok := keys.lookup(h, hasTransferEncoding); ok {
		delete(h, "Transfer-Encoding")
		if resp.ProtoMajor > 1 || resp.ProtoMajor == 1 && resp.ProtoMinor >= 1 {
			if len(te) != 1 {
				return bodyNone, 0, &unsupportedTEError{fmt.Sprintf("too many transfer encodings: %q", te)}
			}
			if !strings.EqualFold(te[0], "chunked") {
				return bodyNone, 0, &unsupportedTEError{fmt.Sprintf("unsupported transfer encoding: %q", te[0])}
			}
			chunked = true
		}
	}

	length, err := responseLength(resp.StatusCode, method, h, keys, chunked)
	if err != nil {
		return bodyNone, 0, err
	}
	if method == "HEAD" {
		cls, _ := keys.lookup(h, hasContentLength)
		n, err := parseContentLength(cls)
		if err != nil {
			return bodyNone, 0, err
		}
		resp.ContentLength = n
	} else {
		resp.ContentLength = length
	}

	if resp.Trailer, err = declaredTrailer(h, keys, chunked); err != nil {
		return bodyNone, 0, err
	}
	if length == -1 && !chunked && bodyAllowedForStatus(resp.StatusCode) {
		resp.Close = true
	}
	if chunked {
		resp.TransferEncoding = chunkedEncoding
	}
	switch {
	case chunked:
		if method == "HEAD" || !bodyAllowedForStatus(resp.StatusCode) {
			return bodyNone, 0, nil
		}
		return bodyChunked, -1, nil
	case length == 0:
		return bodyNone, 0, nil
	case length > 0:
		return bodyLength, length, nil
	case resp.Close:
		return bodyUntilClose, -1, nil
	}
	return bodyNone, 0, nil
}

// chunkedEncoding is shared by every chunked response; callers must not
// modify resp.TransferEncoding (net/http allocates a fresh one; no caller
// is known to write to it).
var chunkedEncoding = []string{"chunked"}

// responseLength is net/http's fixLength for responses.
func responseLength(status int, method string, h http.Header, keys framingKeys, chunked bool) (int64, error) {
	cls, _ := keys.lookup(h, hasContentLength)
	if len(cls) > 1 {
		first := strings.TrimSpace(cls[0])
		for _, v := range cls[1:] {
			if strings.TrimSpace(v) != first {
				return 0, fmt.Errorf("http: message cannot contain multiple Content-Length headers; got %q", cls)
			}
		}
		h["Content-Length"] = []string{first}
		cls = h["Content-Length"]
	}
	var n int64
	if len(cls) > 0 {
		var err error
		if n, err = parseContentLength(cls); err != nil {
			return -1, err
		}
	}
	if method == "HEAD" || status/100 == 1 || status == 204 || status == 304 {
		return 0, nil
	}
	if chunked {
		delete(h, "Content-Length")
		return -1, nil
	}
	if len(cls) > 0 {
		return n, nil
	}
	return -1, nil
}

// parseContentLength parses the first Content-Length value; none is -1.
func parseContentLength(cls []string) (int64, error) {
	if len(cls) == 0 {
		return -1, nil
	}
	cl := strings.TrimSpace(cls[0])
	if cl == "" {
		return 0, &badStringError{"invalid empty Content-Length", cl}
	}
	n, err := strconv.ParseUint(cl, 10, 63)
	if err != nil {
		return 0, &badStringError{"bad Content-Length", cl}
	}
	return int64(n), nil
}

// declaredTrailer turns the Trailer header of a chunked response into the
// set of announced trailer keys (values filled at EOF) and removes it.
func declaredTrailer(h http.Header, keys framingKeys, chunked bool) (http.Header, error) {
	vv, ok := keys.lookup(h, hasTrailer)
	if !ok || !chunked {
		return nil, nil
	}
	delete(h, "Trailer")
	trailer := make(http.Header)
	for _, v := range vv {
		for _, key := range strings.Split(v, ",") {
			key = strings.TrimSpace(key)
			if key == "" {
				continue
			}
			key = http.CanonicalHeaderKey(key)
			switch key {
			case "Transfer-Encoding", "Trailer", "Content-Length":
				return nil, &badStringError{"bad trailer key", key}
			}
			trailer[key] = nil
		}
	}
	if len(trailer) == 0 {
		return nil, nil
	}
	return trailer, nil
}

// shouldCloseResponse is net/http's shouldClose for responses: HTTP/1.0
// closes unless it asked for keep-alive; "Connection: close" closes and is
// removed from an HTTP/1.1 header.
func shouldCloseResponse(major, minor int, h http.Header, keys framingKeys) bool {
	if major < 1 {
		return true
	}
	conv, _ := keys.lookup(h, hasConnection)
	hasClose := httpguts.HeaderValuesContainsToken(conv, "close")
	if major == 1 && minor == 0 {
		return hasClose || !httpguts.HeaderValuesContainsToken(conv, "keep-alive")
	}
	if hasClose {
		delete(h, "Connection")
	}
	return hasClose
}

// bodyAllowedForStatus reports whether a response with status may carry a
// body (RFC 9110: not 1xx, 204 or 304).
func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == 204, status == 304:
		return false
	}
	return true
}

// isProtocolSwitch reports whether resp switches protocols (101 with an
// Upgrade header and "Connection: Upgrade").
func isProtocolSwitch(resp *http.Response) bool {
	return resp.StatusCode == http.StatusSwitchingProtocols && isUpgradeHeader(resp.Header)
}

func isUpgradeHeader(h http.Header) bool {
	return httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") && len(h["Upgrade"]) > 0 && h["Upgrade"][0] != ""
}
