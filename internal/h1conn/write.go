package h1conn

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Writing an HTTP/1.1 request head and body into the connection's
// bufio.Writer, byte for byte as net/http's Request.write does (same header
// order: Host, User-Agent, Connection, Content-Length or
// Transfer-Encoding, Trailer, the caller's headers sorted by key, then the
// transport's own Accept-Encoding and Connection), without allocating:
// numbers are appended into the writer's buffer and the request target is
// written in pieces.

// defaultUserAgent is what net/http sends when the caller sets none.
const defaultUserAgent = "Go-http-client/1.1"

// Outgoing is the plan of one request, computed once by Plan: the framing
// of its body and the headers the transport adds. HTTP/2 and HTTP/3 read
// its body, method, host and trace too; a proxy route sets ProxyForm and
// ProxyAuth.
type Outgoing struct {
	Req           *http.Request
	Body          io.ReadCloser // nil: no body to send
	ContentLength int64         // -1 with chunked
	Chunked       bool
	// EmptyChunked: http.NoBody with the caller's Transfer-Encoding:
	// chunked; the head ends with the empty body's last chunk and trailer
	// (with Expect: 100-continue, sendBody writes them after the 100).
	EmptyChunked   bool
	SendCL         bool // write a Content-Length header
	AddGzip        bool // transport adds Accept-Encoding: gzip and decodes
	AddClose       bool // DisableKeepAlives: transport adds Connection: close
	ExpectContinue bool
	probe          bool // an unknown-length body net/http probes (probebody.go)
	SyncBody       bool // body known in memory and small (and within the connection's inlineBound): written inline
	Host           string
	Method         string
	Trace          *httptrace.ClientTrace
	ProxyForm      bool   // sent to a forwarding proxy: absolute-form request target
	ProxyAuth      string // Proxy-Authorization the transport adds (forwarding proxy), "" if none
	// GetConnFired: the HTTP/3 path fired GetConn for this attempt and then
	// sent the request to TCP; the transport does not fire it again (once).
	GetConnFired bool
	// streamBody: the body is sent piece by piece as it yields them (set by
	// the body writer for a body not known to be in memory).
	streamBody bool
}

// errBodyLength reports a body whose length differs from ContentLength.
func errBodyLength(declared, actual int64) error {
	return fmt.Errorf("http: ContentLength=%d with Body length %d", declared, actual)
}

// requestBodyReadError marks an error returned by the caller's body; it has
// priority over the network errors it causes, and RoundTrip returns the
// caller's error itself.
type requestBodyReadError struct{ err error }

func (e requestBodyReadError) Error() string { return e.err.Error() }
func (e requestBodyReadError) Unwrap() error { return e.err }

// writeRequestHead writes the request line and header block of o into bw.
func writeRequestHead(bw *bufio.Writer, o *Outgoing) error {
	req := o.Req
	trace := o.Trace
	if err := writeRequestLine(bw, o); err != nil {
		return err
	}
	bw.WriteString("Host: ")
	bw.WriteString(o.Host)
	bw.WriteString("\r\n")
	if trace != nil && trace.WroteHeaderField != nil {
		trace.WroteHeaderField("Host", []string{o.Host})
	}

	ua := defaultUserAgent
	if v, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(v) > 0 {
			ua = v[0]
		}
	}
	if ua != "" {
		// A value of only white space is sent empty, as net/http does
		// (it trims after deciding to send the field).
		ua = trimHeaderValue(ua)
		bw.WriteString("User-Agent: ")
		bw.WriteString(ua)
		bw.WriteString("\r\n")
		if trace != nil && trace.WroteHeaderField != nil {
			trace.WroteHeaderField("User-Agent", []string{ua})
		}
	}

	if req.Close && !hasToken(firstValue(req.Header, "Connection"), "close") {
		writeField(bw, trace, "Connection", "close")
	}
	if o.SendCL {
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), o.ContentLength, 10))
		bw.WriteString("\r\n")
		if trace != nil && trace.WroteHeaderField != nil {
			trace.WroteHeaderField("Content-Length", []string{strconv.FormatInt(o.ContentLength, 10)})
		}
	} else if o.Chunked {
		writeField(bw, trace, "Transfer-Encoding", "chunked")
	}
	// Trailers go only with a chunked body (net/http drops Trailer
	// otherwise, keys unchecked).
	if o.Chunked && (o.Body != nil || o.EmptyChunked) && len(req.Trailer) > 0 {
		keys := make([]string, 0, len(req.Trailer))
		for k := range req.Trailer {
			k = http.CanonicalHeaderKey(k)
			switch k {
			case "Transfer-Encoding", "Trailer", "Content-Length":
				return &badStringError{"invalid Trailer key", k}
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		bw.WriteString("Trailer: ")
		bw.WriteString(strings.Join(keys, ","))
		bw.WriteString("\r\n")
		if trace != nil && trace.WroteHeaderField != nil {
			trace.WroteHeaderField("Trailer", keys)
		}
	}

	hdr := req.Header
	if _, ok := hdr["Proxy-Authorization"]; ok && o.ProxyAuth != "" {
		// The proxy URL's credentials replace the caller's (net/http
		// would send both).
		hdr = hdr.Clone()
		delete(hdr, "Proxy-Authorization")
	}
	writeSortedHeader(bw, hdr, trace, true)

	if o.AddGzip {
		writeField(bw, trace, "Accept-Encoding", "gzip")
	}
	if o.AddClose {
		writeField(bw, trace, "Connection", "close")
	}
	if o.ProxyAuth != "" {
		writeField(bw, trace, "Proxy-Authorization", o.ProxyAuth)
	}
	bw.WriteString("\r\n")
	if trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	if o.EmptyChunked && !o.ExpectContinue {
		writeLastChunk(bw, req.Trailer)
	}
	return nil
}

// writeRequestLine writes "METHOD target HTTP/1.1\r\n"; the target is in
// absolute form ("http://host/path") for a forwarding proxy.
func writeRequestLine(bw *bufio.Writer, o *Outgoing) error {
	u := o.Req.URL
	var path, query string
	hasQuery := false
	absolute := o.ProxyForm && u.Scheme != "" && u.Opaque == ""
	switch {
	case o.Method == "CONNECT" && u.Path == "" && !absolute:
		path = o.Host
		if u.Opaque != "" {
			path = u.Opaque
		}
	case u.Opaque != "":
		path = u.RequestURI() // rare: let net/url handle opaque forms
	default:
		path = u.EscapedPath()
		if path == "" {
			path = "/"
		}
		if u.ForceQuery || u.RawQuery != "" {
			hasQuery = true
			query = u.RawQuery
		}
	}
	if hasCTL(path) || hasCTL(query) {
		return errors.New("net/http: can't write control character in Request.URL")
	}
	bw.WriteString(o.Method)
	bw.WriteByte(' ')
	if absolute {
		bw.WriteString(u.Scheme)
		bw.WriteString("://")
		bw.WriteString(o.Host)
	}
	bw.WriteString(path)
	if hasQuery {
		bw.WriteByte('?')
		bw.WriteString(query)
	}
	bw.WriteString(" HTTP/1.1\r\n")
	return nil
}

func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < ' ' || b == 0x7f {
			return true
		}
	}
	return false
}

// hasToken reports whether token occurs in v as net/http's hasToken
// finds it (its check of one header value for "close"): case-insensitively,
// bounded by the value's ends, spaces, tabs or commas.
func hasToken(v, token string) bool {
	for i := 0; i+len(token) <= len(v); i++ {
		if i > 0 && !isTokenBoundary(v[i-1]) {
			continue
		}
		if end := i + len(token); end != len(v) && !isTokenBoundary(v[end]) {
			continue
		}
		if strings.EqualFold(v[i:i+len(token)], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

func writeField(bw *bufio.Writer, trace *httptrace.ClientTrace, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
	if trace != nil && trace.WroteHeaderField != nil {
		trace.WroteHeaderField(k, []string{v})
	}
}

// requestExcluded lists the keys net/http writes itself, not from Header.
func requestExcluded(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// writeSortedHeader writes h sorted by key (as http.Header.Write does),
// using a stack array for up to 32 keys.
func writeSortedHeader(bw *bufio.Writer, h http.Header, trace *httptrace.ClientTrace, isRequest bool) {
	if len(h) == 0 {
		return // starting an iteration, even over nothing, costs ~100 instructions
	}
	var stack [32]string
	keys := stack[:0]
	for k := range h {
		if isRequest && requestExcluded(k) {
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) <= len(stack) {
		for i := 1; i < len(keys); i++ { // insertion sort: tiny n, no allocation
			for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
				keys[j], keys[j-1] = keys[j-1], keys[j]
			}
		}
	} else {
		slices.Sort(keys)
	}
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		vv := h[k]
		for _, v := range vv {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(trimHeaderValue(v))
			bw.WriteString("\r\n")
		}
		if trace != nil && trace.WroteHeaderField != nil {
			formatted := make([]string, len(vv))
			for i, v := range vv {
				formatted[i] = trimHeaderValue(v)
			}
			trace.WroteHeaderField(k, formatted)
		}
	}
}

// trimHeaderValue trims ASCII white space as textproto.TrimString does;
// values were validated, so they hold no line breaks.
func trimHeaderValue(v string) string {
	for len(v) > 0 && isASCIISpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isASCIISpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	return v
}

func isASCIISpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// writeRequestBody copies the body into w with o's framing, then closes
// req.Body. Errors from the caller's body are wrapped in
// requestBodyReadError.
func (pc *Conn) writeRequestBody(o *Outgoing) error {
	_, err := pc.writeRequestBodySide(o)
	return err
}

// writeRequestBodySide is writeRequestBody that also reports whether a
// failure is the caller's (its body's Read or Close failed, or its length
// differs from ContentLength) rather than the connection's: after such a
// failure nothing on the connection will fail by itself.
func (pc *Conn) writeRequestBodySide(o *Outgoing) (callerSide bool, err error) {
	bw := pc.bw
	defer func() {
		if cerr := pc.CloseReqBody(o.Body); cerr != nil && err == nil {
			callerSide, err = true, cerr
		}
	}()
	defer func() {
		if _, ok := err.(requestBodyReadError); ok {
			callerSide = true
		}
	}()
	if o.Chunked {
		return false, writeChunkedBody(bw, o, pc)
	}
	if o.ContentLength < 0 { // CONNECT with a body: raw until EOF
		_, err := copyBody(bw, bodyReader{o.Body, pc}, o.streamBody)
		return false, err
	}
	var n int64
	if f := pc.kernelCopyFile(o); f != nil {
		n, err = pc.copyFileBody(f, o.ContentLength)
	} else {
		n, err = copyBody(bw, bodyReader{io.LimitReader(o.Body, o.ContentLength), pc}, o.streamBody)
	}
	if err != nil {
		return false, err
	}
	// Read what is left to report a body longer than declared, as net/http.
	extra, err := io.Copy(io.Discard, bodyReader{o.Body, pc})
	if err != nil {
		return false, err
	}
	if n+extra != o.ContentLength {
		return true, errBodyLength(o.ContentLength, n+extra)
	}
	return false, nil
}

// copyBody copies r into bw. With stream, every piece r yields is sent at
// once (net/http copies a body it does not know to be in memory straight
// to the connection), so a server that answers a piece before the next one
// is produced gets it.
func copyBody(bw *bufio.Writer, r io.Reader, stream bool) (int64, error) {
	if !stream {
		return bw.ReadFrom(r)
	}
	bufp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bufp)
	buf := *bufp
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			total += int64(n)
			bw.Write(buf[:n])
			if ferr := bw.Flush(); ferr != nil {
				return total, ferr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// isKnownInMemory reports whether body is one of the readers net/http
// knows to hold their data in memory (possibly inside io.NopCloser, as
// http.NewRequest wraps them): such a body never waits for the server.
// It allocates nothing and costs a few nanoseconds (unwrapNopCloser).
func isKnownInMemory(body io.Reader) bool { return inMemoryReader(body) != nil }

// InMemoryLen returns the bytes not yet read of a body isKnownInMemory
// accepts; ok is false for any other body. The HTTP/2 connection uses it
// to send a small body with its HEADERS (h2conn.ReplayBody.MarkInMemory).
func InMemoryLen(body io.Reader) (n int, ok bool) {
	if r := inMemoryReader(body); r != nil {
		return r.Len(), true
	}
	return 0, false
}

// inMemoryBody is what the readers isKnownInMemory accepts have in common.
type inMemoryBody interface {
	io.Reader
	io.WriterTo
	Len() int // bytes not yet read
}

// inMemoryReader returns the reader holding body's data when isKnownInMemory
// accepts body, nil otherwise.
func inMemoryReader(body io.Reader) inMemoryBody {
	switch b := body.(type) {
	case *bytes.Reader:
		return b
	case *bytes.Buffer:
		return b
	case *strings.Reader:
		return b
	case nil:
		return nil
	}
	if inner, ok := unwrapNopCloser(body); ok {
		return inMemoryReader(inner)
	}
	return nil
}

// unwrapNopCloser returns the reader io.NopCloser wrapped when r is one of
// the two types io.NopCloser returns (one for a reader with WriteTo). The
// wrapper's only field is the embedded io.Reader; reflection reads it
// without allocating (13-16 ns per call, about a hundredth of a request's
// own work in memory).
func unwrapNopCloser(r io.Reader) (io.Reader, bool) {
	if t := reflect.TypeOf(r); t != nopCloserWriterToType && t != nopCloserType {
		return nil, false
	}
	inner, _ := reflect.ValueOf(r).Field(0).Interface().(io.Reader)
	return inner, true
}

var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(struct {
		io.Reader
		io.WriterTo
	}{}))
)

// bodyReader tags errors of the caller's body so they are told apart from
// the connection's write errors; its Reads are pc's (readReqBody).
type bodyReader struct {
	r  io.Reader
	pc *Conn
}

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.pc.readReqBody(b.r, p)
	if err != nil && err != io.EOF {
		err = requestBodyReadError{err}
	}
	return n, err
}

// writeChunkedBody writes the body with the chunked coding, one chunk per
// read, each sent when written, and the caller's trailers.
func writeChunkedBody(bw *bufio.Writer, o *Outgoing, pc *Conn) error {
	if r := inMemoryReader(o.Body); r != nil && !o.streamBody {
		// Known in memory: what is left goes as one chunk, written past the
		// buffer in one Write, as net/http's chunked writer gets it from
		// the reader's WriteTo. (bufio.Writer's WriteString, which a
		// strings.Reader would use, copies through the 4 KiB buffer.)
		if n := r.Len(); n > 0 {
			bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(n), 16))
			bw.WriteString("\r\n")
			if _, err := r.WriteTo(writeOnly{bw}); err != nil {
				return err
			}
			bw.WriteString("\r\n")
		}
		return writeLastChunk(bw, o.Req.Trailer)
	}
	bufp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bufp)
	buf := *bufp
	for {
		n, err := pc.readReqBody(o.Body, buf)
		if n > 0 {
			bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(n), 16))
			bw.WriteString("\r\n")
			bw.Write(buf[:n])
			bw.WriteString("\r\n")
			// Each chunk goes out at once, as net/http sends them.
			if werr := bw.Flush(); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return requestBodyReadError{err}
		}
	}
	return writeLastChunk(bw, o.Req.Trailer)
}

// writeOnly hides every method of a writer but Write.
type writeOnly struct{ w io.Writer }

func (w writeOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

// writeLastChunk ends a chunked body: the zero-size chunk, the trailer
// fields, the blank line.
func writeLastChunk(bw *bufio.Writer, trailer http.Header) error {
	bw.WriteString("0\r\n")
	if len(trailer) > 0 {
		writeSortedHeader(bw, trailer, nil, false)
	}
	_, err := bw.WriteString("\r\n")
	return err
}
