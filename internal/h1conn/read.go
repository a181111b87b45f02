package h1conn

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Reading an HTTP/1.x response head.
//
// The head (status line through the blank line) is located in the
// connection's bufio.Reader with two SIMD searches and copied once into a
// single string; the status text, the protocol, canonical keys and every
// header value are substrings of it. The values share one []string backing
// array (for the first head of a response, an array inside the Response's
// own allocation) and the map is pre-sized from headerEstimate, a moving
// average of the header counts this connection has seen (the parser learns
// the size, the map is not special-cased). A head larger than the read buffer takes a slow
// path that accumulates lines.

// headerLimitError is the error for a head over MaxResponseHeaderBytes,
// worded as net/http words it.
type headerLimitError int64

func (e headerLimitError) Error() string {
	return fmt.Sprintf("net/http: server response headers exceeded %d bytes; aborted", int64(e))
}

// badStringError formats like net/http's badStringError: what followed by
// the quoted value.
type badStringError struct {
	what string
	str  string
}

func (e *badStringError) Error() string { return fmt.Sprintf("%s %q", e.what, e.str) }

// protocolError is a malformed header line, formatted like
// textproto.ProtocolError.
type protocolError string

func (p protocolError) Error() string { return string(p) }

// findHeadEnd returns the length of the head at the start of buf (through
// the blank line), or -1 when buf holds no complete head yet. Lines may end
// in CRLF or a bare LF, so the head ends at the first LF followed by LF or
// by CR LF. One pass from LF to LF: searching for "\n\r\n" and then for
// "\n\n" went over every line twice and cost about three times as much
// (instruction counts of BenchmarkRoundTripInMemory under callgrind).
func findHeadEnd(buf []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1 // just past this LF
		if i < len(buf) && buf[i] == '\n' {
			return i + 1
		}
		if i+1 < len(buf) && buf[i] == '\r' && buf[i+1] == '\n' {
			return i + 2
		}
	}
}

// readHead reads one response head from br into a string. limit bounds its
// length. A clean EOF before any byte returns io.EOF; a head cut short
// returns io.ErrUnexpectedEOF.
func readHead(br *bufio.Reader, limit int64) (string, error) {
	want := 1
	for {
		_, err := br.Peek(want)
		buf, _ := br.Peek(br.Buffered())
		if end := findHeadEnd(buf); end >= 0 {
			if int64(end) > limit {
				return "", headerLimitError(limit)
			}
			head := string(buf[:end])
			br.Discard(end)
			return head, nil
		}
		if int64(len(buf)) > limit {
			return "", headerLimitError(limit)
		}
		if err != nil {
			if err == bufio.ErrBufferFull {
				return readLongHead(br, limit)
			}
			if err == io.EOF && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		if len(buf) == br.Size() {
			return readLongHead(br, limit)
		}
		want = len(buf) + 1
	}
}

// readLongHead accumulates a head that does not fit in br's buffer, line by
// line, until the blank line that follows the status line and fields.
func readLongHead(br *bufio.Reader, limit int64) (string, error) {
	block, err := readLineBlock(br, limit, false)
	if err == errLineBlockTooLong {
		err = headerLimitError(limit)
	}
	return block, err
}

// errLineBlockTooLong marks a block over its limit; it never reaches users.
var errLineBlockTooLong = errors.New("line block over its limit")

// readLineBlock reads lines from br into one string through the first blank
// line (CRLF or bare LF), which a first line may be only when firstMayEnd.
// More than limit bytes gives errLineBlockTooLong, which callers turn into
// their own error; a stream that ends first gives io.ErrUnexpectedEOF.
func readLineBlock(br *bufio.Reader, limit int64, firstMayEnd bool) (string, error) {
	var acc []byte
	lineStart := 0
	for {
		frag, err := br.ReadSlice('\n')
		acc = append(acc, frag...)
		if int64(len(acc)) > limit {
			return "", errLineBlockTooLong
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		line := acc[lineStart:]
		blank := len(line) == 1 || len(line) == 2 && line[0] == '\r'
		if blank && (lineStart > 0 || firstMayEnd) {
			return string(acc), nil
		}
		lineStart = len(acc)
	}
}

// nextLine splits s at the first LF, returning the line without its CRLF or
// LF and the rest.
func nextLine(s string) (line, rest string) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return s, ""
	}
	line, rest = s[:i], s[i+1:]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, rest
}

// parseStatusLine fills Proto, ProtoMajor, ProtoMinor, Status and StatusCode
// with net/http's rules and error texts.
func parseStatusLine(line string, resp *http.Response) error {
	proto, status, ok := strings.Cut(line, " ")
	if !ok {
		return &badStringError{"malformed HTTP response", line}
	}
	resp.Proto = proto
	resp.Status = strings.TrimLeft(status, " ")
	code, _, _ := strings.Cut(resp.Status, " ")
	if len(code) != 3 {
		return &badStringError{"malformed HTTP status code", code}
	}
	n, err := strconv.Atoi(code)
	if err != nil || n < 0 {
		return &badStringError{"malformed HTTP status code", code}
	}
	resp.StatusCode = n
	switch proto {
	case "HTTP/1.1":
		resp.ProtoMajor, resp.ProtoMinor = 1, 1
	case "HTTP/1.0":
		resp.ProtoMajor, resp.ProtoMinor = 1, 0
	default:
		if resp.ProtoMajor, resp.ProtoMinor, ok = http.ParseHTTPVersion(proto); !ok {
			return &badStringError{"malformed HTTP version", proto}
		}
	}
	return nil
}

// validValueByte reports whether c may appear in a header value (VCHAR, SP,
// HTAB or obs-text), as textproto accepts.
func validValueByte(c byte) bool {
	return c >= 0x20 && c != 0x7f || c == '\t'
}

// invalidValueByte is 1 for the bytes validValueByte refuses.
var invalidValueByte = func() (t [256]uint8) {
	for c := range t {
		if !validValueByte(byte(c)) {
			t[c] = 1
		}
	}
	return t
}()

// validValue reports whether every byte of v may appear in a header value:
// one table load and an OR per byte (7 instructions in its amd64 loop) and
// a single test at the end, where testing each byte with validValueByte
// branched on every byte. Its own saving was not measured apart: the
// commit that brought it moved the in-memory GET by 76 instructions
// together with the key filter's new mix.
func validValue(v string) bool {
	bad := uint8(0)
	for i := range len(v) {
		bad |= invalidValueByte[v[i]]
	}
	return bad == 0
}

// keyFilterBit maps a header key to one of 64 bits, from its length and
// its first and last bytes, so that a head's keys can be told apart from
// the keys before them without a map lookup (a lookup in a small map
// compares the key with every stored key of its length: four of them
// cost about 600 instructions, callgrind, BenchmarkRoundTripInMemory).
// Equal keys always get the same bit; different keys may share one, which
// only costs the lookup. The three values are mixed by a multiplication
// (Fibonacci hashing, top six bits): 25 common response keys share 3 bits.
// k is not empty.
func keyFilterBit(k string) uint64 {
	x := uint32(len(k)) | uint32(k[0])<<8 | uint32(k[len(k)-1])<<16
	return 1 << ((x * 0x9E3779B1) >> 26)
}

// trimOWS trims spaces and tabs at both ends.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseHeaderFields parses the header lines in s (everything after the
// status line, through the blank line) into a new header map sized for
// hint entries. It returns the header and the number of field lines.
func parseHeaderFields(s string, hint int) (http.Header, int, error) {
	h, n, _, err := parseHeaderFieldsInto(s, hint, nil)
	return h, n, err
}

// parseHeaderFieldsInto is parseHeaderFields with the values backed by
// spare first, when not nil (saving an allocation), that also reports
// which framing keys the header holds.
func parseHeaderFieldsInto(s string, hint int, spare []string) (http.Header, int, framingKeys, error) {
	if len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		line, _ := nextLine(s)
		return nil, 0, 0, protocolError(fmt.Sprintf("malformed MIME header initial line: %q", line))
	}
	h := make(http.Header, hint)
	strs := spare // when more keys come than spare holds, more is made below
	if strs == nil {
		strs = make([]string, hint)
	}
	fields := 0
	var keys framingKeys
	var keysSeen uint64 // keyFilterBit of every key stored so far
	for {
		var line string
		line, s = nextLine(s)
		if line == "" {
			return h, fields, keys, nil
		}
		// obs-fold: continuation lines join the previous line with one space.
		// The field name must be on the first line (textproto checks the
		// colon there).
		folded := len(s) > 0 && (s[0] == ' ' || s[0] == '\t')
		if folded {
			if strings.IndexByte(line, ':') < 0 {
				return nil, 0, 0, protocolError(fmt.Sprintf("malformed MIME header: missing colon: %q", line))
			}
			joined := []byte(trimOWS(line))
			for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
				var cont string
				cont, s = nextLine(s)
				joined = append(joined, ' ')
				joined = append(joined, trimOWS(cont)...)
			}
			line = string(joined)
		}
		colon := strings.IndexByte(line, ':') // strings.Cut goes through strings.Index: ~60 instructions more
		if colon < 0 {
			return nil, 0, 0, protocolError(fmt.Sprintf("malformed MIME header: missing colon: %q", line))
		}
		k, v := line[:colon], line[colon+1:]
		switch classifyKey(k) {
		case keyInvalid:
			return nil, 0, 0, protocolError(fmt.Sprintf("malformed MIME header line: %q", line))
		case keyNeedsFold:
			k = foldKey(k)
		}
		keys |= framingKeyOf(k)
		if !validValue(v) {
			return nil, 0, 0, protocolError(fmt.Sprintf("malformed MIME header line: %q", line))
		}
		if folded {
			// Each joined piece is trimmed already; like textproto, only
			// the blanks after the colon go, so a blank last continuation
			// leaves its joining space (FuzzHeadMatchesReadResponse).
			v = strings.TrimLeft(v, " \t")
		} else {
			v = trimOWS(v)
		}
		fields++
		// A key repeated in the head adds to its values. Most keys come
		// once: a lookup is made only when the filter says the key may
		// have come before.
		if bit := keyFilterBit(k); keysSeen&bit == 0 {
			keysSeen |= bit
		} else if vv, seen := h[k]; seen {
			h[k] = append(vv, v)
			continue
		}
		if len(strs) == 0 {
			strs = make([]string, strings.Count(s, "\n")+1)
		}
		vv := strs[:1:1]
		strs = strs[1:]
		vv[0] = v
		h[k] = vv
	}
}
