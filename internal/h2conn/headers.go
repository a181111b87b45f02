package h2conn

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// The header rules of the own connection, as net/http's HTTP/2 client has
// them: which request fields go out (connection-specific ones are refused
// or dropped, :authority from Host, te only as "trailers", a default
// User-Agent, content-length, accept-encoding for transparent gzip), and
// what a response must look like (one :status, three digits; trailers
// only after the head and with END_STREAM).

// defaultUserAgent is what net/http's HTTP/2 client sends when a request
// has no User-Agent.
const defaultUserAgent = "Go-http-client/2.0"

// requestHead is a validated request's pseudo-header values and the
// decisions that shape its header list.
type requestHead struct {
	authority, path string
	trailers        string // the "trailer" field, "" for none
	contentLength   int64  // -1: unknown (body streamed until EOF)
	sendLength      bool   // send content-length
	gzip            bool   // ask for gzip and decompress the response
}

// checkRequest validates req as net/http's HTTP/2 client does and returns
// what encoding its header list needs.
func (c *clientConn) checkRequest(req *http.Request) (requestHead, error) {
	var h requestHead
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	host, err := httpguts.PunycodeHostPort(host)
	if err != nil {
		return h, err
	}
	if !httpguts.ValidHostHeader(host) {
		return h, errors.New("http2: invalid Host header")
	}
	h.authority = host
	if req.Method != "" && !validMethod(req.Method) {
		return h, fmt.Errorf("net/http: invalid method %q", req.Method)
	}
	if req.Method != http.MethodConnect {
		path := req.URL.RequestURI()
		if !validPseudoPath(path) {
			orig := path
			path = strings.TrimPrefix(path, req.URL.Scheme+"://"+host)
			if !validPseudoPath(path) {
				if req.URL.Opaque != "" {
					return h, fmt.Errorf("invalid request :path %q from URL.Opaque = %q", orig, req.URL.Opaque)
				}
				return h, fmt.Errorf("invalid request :path %q", orig)
			}
		}
		h.path = path
	}
	if err := checkConnHeaders(req.Header); err != nil {
		return h, err
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return h, fmt.Errorf("invalid HTTP header name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return h, fmt.Errorf("invalid HTTP header value for header %q", k)
			}
		}
	}
	if len(req.Trailer) > 0 {
		keys := make([]string, 0, len(req.Trailer))
		for k := range req.Trailer {
			k = http.CanonicalHeaderKey(k)
			switch k {
			case "Transfer-Encoding", "Trailer", "Content-Length":
				return h, fmt.Errorf("invalid Trailer key %q", k)
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h.trailers = strings.Join(keys, ",")
	}
	h.contentLength = requestLength(req)
	h.sendLength = h.contentLength > 0 || (h.contentLength == 0 && (req.Method == "POST" || req.Method == "PUT" || req.Method == "PATCH"))
	h.gzip = !c.disableCompression && req.Header.Get("Accept-Encoding") == "" &&
		req.Header.Get("Range") == "" && req.Method != http.MethodHead
	return h, nil
}

// requestLength is the body's length: 0 without a body, -1 when unknown.
func requestLength(req *http.Request) int64 {
	if req.Body == nil || req.Body == http.NoBody {
		return 0
	}
	if req.ContentLength != 0 {
		return req.ContentLength
	}
	return -1
}

// checkConnHeaders refuses the connection-specific request fields that
// HTTP/2 forbids and a caller cannot mean (RFC 9113 section 8.2.2); the
// harmless ones (Connection: close or keep-alive, Transfer-Encoding:
// chunked) are dropped when encoding.
func checkConnHeaders(h http.Header) error {
	if h.Get("Upgrade") != "" {
		return fmt.Errorf("http2: invalid Upgrade request header: %q", h["Upgrade"])
	}
	if vv := h["Transfer-Encoding"]; len(vv) > 0 && (len(vv) > 1 || vv[0] != "" && vv[0] != "chunked") {
		return fmt.Errorf("http2: invalid Transfer-Encoding request header: %q", vv)
	}
	if vv := h["Connection"]; len(vv) > 0 && (len(vv) > 1 || vv[0] != "" && !strings.EqualFold(vv[0], "close") && !strings.EqualFold(vv[0], "keep-alive")) {
		return fmt.Errorf("http2: invalid Connection request header: %q", vv)
	}
	if vv := h["Te"]; len(vv) > 0 && (len(vv) > 1 || vv[0] != "" && vv[0] != "trailers") {
		return fmt.Errorf("http2: invalid Te header field: %q", vv)
	}
	return nil
}

// eachRequestField calls emit for every field of req's header list, in the
// order they go out.
func eachRequestField(req *http.Request, h *requestHead, emit func(name, value string)) {
	emit(":authority", h.authority)
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	emit(":method", method)
	if method != http.MethodConnect {
		emit(":path", h.path)
		emit(":scheme", req.URL.Scheme)
	}
	if h.trailers != "" {
		emit("trailer", h.trailers)
	}
	didUA := false
	for k, vv := range req.Header {
		lk, ascii := asciiLower(k)
		if !ascii {
			continue // not a valid field name (checked): never sent
		}
		switch lk {
		case "host", "content-length", "connection", "proxy-connection",
			"transfer-encoding", "upgrade", "keep-alive":
			continue
		case "user-agent":
			didUA = true
			if len(vv) == 0 || vv[0] == "" {
				continue
			}
			vv = vv[:1]
		case "te":
			// checkConnHeaders allowed only "trailers" (or empty).
			if len(vv) == 0 || vv[0] != "trailers" {
				continue
			}
		}
		for _, v := range vv {
			emit(lk, v)
		}
	}
	if h.sendLength {
		emit("content-length", strconv.FormatInt(h.contentLength, 10))
	}
	if h.gzip {
		emit("accept-encoding", "gzip")
	}
	if !didUA {
		emit("user-agent", defaultUserAgent)
	}
}

// fieldSize is a field's size as SETTINGS_MAX_HEADER_LIST_SIZE counts it.
func fieldSize(name, value string) uint64 { return uint64(len(name) + len(value) + 32) }

// errRequestHeaderListSize is net/http's error for a request whose header
// list exceeds the server's SETTINGS_MAX_HEADER_LIST_SIZE.
var errRequestHeaderListSize = errors.New("http2: request header list larger than peer's advertised limit")

func validPseudoPath(v string) bool {
	return v != "" && (v[0] == '/' || v == "*")
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return m != ""
}

// responseHead checks a response's HEADERS and builds the response (without
// Body) or, for 1xx, its code and header.
func (c *clientConn) responseHead(f *http2.MetaHeadersFrame) (*http.Response, error) {
	status := ""
	for _, hf := range f.PseudoFields() {
		if hf.Name != ":status" || status != "" {
			return nil, errMalformedPseudo
		}
		status = hf.Value
	}
	if status == "" {
		return nil, errors.New("malformed response from server: missing status pseudo header")
	}
	code, err := strconv.Atoi(status)
	if err != nil || len(status) != 3 || code < 100 {
		return nil, errors.New("malformed response from server: malformed non-numeric status pseudo header")
	}
	regular := f.RegularFields()
	header := make(http.Header, len(regular))
	resp := &http.Response{
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     header,
		StatusCode: code,
		Status:     statusLine(code, status),
	}
	// One backing array for the values: most fields appear once.
	vals := make([]string, len(regular))
	for _, hf := range regular {
		key := c.canonicalKey(hf.Name)
		if key == "Trailer" {
			if resp.Trailer == nil {
				resp.Trailer = make(http.Header)
			}
			for _, v := range strings.Split(hf.Value, ",") {
				if v = textproto.TrimString(v); v != "" {
					resp.Trailer[http.CanonicalHeaderKey(v)] = nil
				}
			}
			continue
		}
		if vv := header[key]; vv != nil {
			header[key] = append(vv, hf.Value)
			continue
		}
		vals[0] = hf.Value
		header[key] = vals[:1:1]
		vals = vals[1:]
	}
	resp.ContentLength = -1
	if cl := header["Content-Length"]; len(cl) == 1 {
		if n, err := strconv.ParseUint(cl[0], 10, 63); err == nil {
			resp.ContentLength = int64(n)
		}
	}
	return resp, nil
}

// errMalformedPseudo is the stream error for a response with a pseudo
// field other than one :status.
var errMalformedPseudo = errors.New("http2: invalid response pseudo-header")

// trailerHeader builds the header of a trailers HEADERS frame.
func (c *clientConn) trailerHeader(f *http2.MetaHeadersFrame) (http.Header, error) {
	if len(f.PseudoFields()) > 0 {
		return nil, errors.New("http2: pseudo-header in trailer")
	}
	if !f.StreamEnded() {
		return nil, errors.New("http2: trailers without END_STREAM")
	}
	t := make(http.Header, len(f.RegularFields()))
	for _, hf := range f.RegularFields() {
		k := c.canonicalKey(hf.Name)
		t[k] = append(t[k], hf.Value)
	}
	return t, nil
}

// asciiLower lower-cases an ASCII field name (without allocating when it
// already is); ok is false for a name with a non-ASCII byte.
func asciiLower(s string) (lower string, ok bool) {
	upper := false
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x80 {
			return "", false
		}
		upper = upper || ('A' <= b && b <= 'Z')
	}
	if !upper {
		return s, true
	}
	return strings.ToLower(s), true
}

// asksToClose reports whether req asks to close the connection after it
// (Request.Close or a "close" token in Connection), after which the
// connection takes no new stream.
func asksToClose(req *http.Request) bool {
	if req.Close {
		return true
	}
	for _, v := range req.Header["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "close") {
				return true
			}
		}
	}
	return false
}

// maxCanonCache bounds how many field names a connection remembers the
// canonical form of.
const maxCanonCache = 256

// canonicalKey is textproto.CanonicalMIMEHeaderKey(name), remembered per
// connection so that a response field the server sends on every response
// (a name HPACK hands back as the same string each time) is canonicalized
// without an allocation after the first. Only the frame reader calls it.
func (c *clientConn) canonicalKey(name string) string {
	if key, ok := c.canon[name]; ok {
		return key
	}
	key := textproto.CanonicalMIMEHeaderKey(name)
	if len(name) <= 64 && len(c.canon) < maxCanonCache {
		if c.canon == nil {
			c.canon = make(map[string]string)
		}
		c.canon[name] = key
	}
	return key
}

// statusLines holds resp.Status for the codes net/http has a text for.
var statusLines [600]string

func init() {
	for code := 100; code < len(statusLines); code++ {
		if text := http.StatusText(code); text != "" {
			statusLines[code] = strconv.Itoa(code) + " " + text
		}
	}
}

// statusLine is resp.Status for a response's three-digit :status value
// (status, code its number): the code and net/http's text for it.
func statusLine(code int, status string) string {
	if code < len(statusLines) && statusLines[code] != "" {
		return statusLines[code]
	}
	return status + " " + http.StatusText(code)
}
