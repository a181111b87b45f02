package altsvc

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultMaxAge is the freshness of an alternative whose `ma` parameter is
// absent (RFC 7838 section 3.1).
const DefaultMaxAge = 24 * time.Hour

// maxMaxAgeSeconds caps `ma` so that expiry arithmetic cannot overflow; it is
// the largest delta-seconds value RFC 9111 section 1.2.2 asks caches to keep.
const maxMaxAgeSeconds = 1<<31 - 1

// ErrMalformed is wrapped by every [*ParseError].
var ErrMalformed = errors.New("altsvc: malformed alternative")

// ParseError reports one alternative that was skipped; the other
// alternatives of the same field value are unaffected. It unwraps to
// [ErrMalformed].
type ParseError struct {
	// Value is the text of the skipped alternative (truncated to 80 bytes).
	Value string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("altsvc: skipped alternative %q: %s", e.Value, e.Reason)
}

// Unwrap returns [ErrMalformed].
func (e *ParseError) Unwrap() error { return ErrMalformed }

func newParseError(value, reason string) *ParseError {
	if len(value) > 80 {
		value = value[:80]
	}
	return &ParseError{Value: value, Reason: reason}
}

// Service is one alternative service as advertised in an Alt-Svc field.
type Service struct {
	// Protocol is the ALPN protocol id, percent-decoded (for example "h3").
	Protocol string
	// Host is the normalised alternative host, or "" when the alternative
	// names none and so means the origin's own host.
	Host string
	// Port is the alternative port, 1..65535.
	Port uint16
	// MaxAge is the `ma` parameter, [DefaultMaxAge] when absent. The
	// response's Age has not been subtracted yet.
	MaxAge time.Duration
	// Persist is true for `persist=1`: the alternative survives network
	// changes.
	Persist bool
}

// Header is a parsed Alt-Svc field (all the header lines of one response).
type Header struct {
	// Clear is true when the field is the special value `clear`: the
	// origin's alternatives are to be removed. Services is then empty.
	Clear bool
	// Services are the valid alternatives, in the server's preference order.
	Services []Service
}

// Parse parses the values of the Alt-Svc header lines of one response (as
// found in an http.Header) per RFC 7838 section 3. Empty list elements are
// ignored; unknown parameters are ignored; `persist` values other than "1"
// are ignored (section 3.1).
//
// A malformed alternative is skipped and the others are kept: the returned
// Header is usable even when err is non-nil, and err then joins one
// [*ParseError] per skipped alternative (errors.As finds the first; the
// Unwrap() []error method lists them all). `clear` must be the whole field: a
// `clear` next to valid alternatives is skipped and reported. Parse never
// panics, whatever its input.
func Parse(values []string) (Header, error) {
	var h Header
	var errs []error
	clears := 0
	for _, line := range values {
		rest := line
		for rest != "" {
			var elem string
			var err error
			elem, rest, err = nextElement(rest)
			elem = trimOWS(elem)
			switch {
			case err != nil:
				errs = append(errs, newParseError(elem, err.Error()))
			case elem == "":
			case elem == "clear":
				clears++
			default:
				svc, err := parseAlternative(elem)
				if err != nil {
					errs = append(errs, newParseError(elem, err.Error()))
					continue
				}
				h.Services = append(h.Services, svc)
			}
		}
	}
	if clears > 0 {
		if len(h.Services) == 0 {
			h.Clear = true
		} else {
			errs = append(errs, newParseError("clear", "clear must be the only value of the field"))
		}
	}
	return h, errors.Join(errs...)
}

// nextElement cuts the first comma-separated element off s, honouring
// quoted strings. An unterminated quoted string consumes the rest of s.
func nextElement(s string) (elem, rest string, err error) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == ',':
			return s[:i], s[i+1:], nil
		}
	}
	if inQuote {
		return s, "", errors.New("unterminated quoted-string")
	}
	return s, "", nil
}

// parseAlternative parses `protocol-id "=" alt-authority *( OWS ";" OWS
// parameter )`.
func parseAlternative(s string) (Service, error) {
	svc := Service{MaxAge: DefaultMaxAge}
	eq := strings.IndexByte(s, '=')
	if eq <= 0 {
		return svc, errors.New(`expected protocol-id "=" alt-authority`)
	}
	proto, err := decodeProtocolID(s[:eq])
	if err != nil {
		return svc, err
	}
	svc.Protocol = proto
	authority, rest, err := cutValue(s[eq+1:])
	if err != nil {
		return svc, err
	}
	if !authority.quoted {
		return svc, errors.New("alt-authority must be a quoted-string")
	}
	if svc.Host, svc.Port, err = parseAltAuthority(authority.text); err != nil {
		return svc, err
	}
	seenMA := false
	for {
		rest = trimOWS(rest)
		if rest == "" {
			return svc, nil
		}
		if rest[0] != ';' {
			return svc, fmt.Errorf("unexpected %q after alternative", clip(rest))
		}
		rest = trimOWS(rest[1:])
		if rest == "" {
			return svc, nil // a trailing ";" is tolerated
		}
		n := 0
		for n < len(rest) && isTchar(rest[n]) {
			n++
		}
		if n == 0 || n == len(rest) || rest[n] != '=' {
			return svc, fmt.Errorf("malformed parameter %q", clip(rest))
		}
		name := rest[:n]
		var v value
		if v, rest, err = cutValue(rest[n+1:]); err != nil {
			return svc, err
		}
		switch {
		case strings.EqualFold(name, "ma"):
			if seenMA {
				continue // the first ma wins
			}
			seenMA = true
			if svc.MaxAge, err = parseMaxAge(v.text); err != nil {
				return svc, err
			}
		case strings.EqualFold(name, "persist"):
			if v.text == "1" {
				svc.Persist = true
			}
		}
	}
}

// value is a parameter or authority value: a token or an unescaped
// quoted-string.
type value struct {
	text   string
	quoted bool
}

// cutValue reads a token or quoted-string at the start of s.
func cutValue(s string) (value, string, error) {
	if s == "" {
		return value{}, "", errors.New("missing value")
	}
	if s[0] != '"' {
		n := 0
		for n < len(s) && isTchar(s[n]) {
			n++
		}
		if n == 0 {
			return value{}, "", fmt.Errorf("invalid value %q", clip(s))
		}
		return value{text: s[:n]}, s[n:], nil
	}
	escaped := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			if i+1 >= len(s) {
				return value{}, "", errors.New("unterminated quoted-string")
			}
			escaped = true
			i++
		case c == '"':
			text := s[1:i]
			if escaped {
				text = unescapeQuoted(text)
			}
			return value{text: text, quoted: true}, s[i+1:], nil
		case c < 0x20 && c != '\t', c == 0x7f:
			return value{}, "", errors.New("control character in quoted-string")
		}
	}
	return value{}, "", errors.New("unterminated quoted-string")
}

func unescapeQuoted(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseAltAuthority parses `[ uri-host ] ":" port`.
func parseAltAuthority(s string) (host string, port uint16, err error) {
	var h, p string
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || end+1 >= len(s) || s[end+1] != ':' {
			return "", 0, fmt.Errorf("malformed alt-authority %q", clip(s))
		}
		h, p = s[:end+1], s[end+2:]
	} else {
		i := strings.LastIndexByte(s, ':')
		if i < 0 {
			return "", 0, fmt.Errorf("alt-authority %q has no port", clip(s))
		}
		h, p = s[:i], s[i+1:]
		if strings.IndexByte(h, ':') >= 0 {
			return "", 0, fmt.Errorf("IPv6 literal in %q needs brackets", clip(s))
		}
	}
	n, err := parsePort(p)
	if err != nil {
		return "", 0, err
	}
	if h != "" {
		if h, err = normaliseHost(h); err != nil {
			return "", 0, err
		}
	}
	return h, uint16(n), nil
}

// parseMaxAge parses delta-seconds, saturating at maxMaxAgeSeconds.
func parseMaxAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("empty ma")
	}
	n := int64(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("invalid ma %q", clip(s))
		}
		if n < maxMaxAgeSeconds {
			n = n*10 + int64(c-'0')
		}
	}
	n = min(n, maxMaxAgeSeconds)
	return time.Duration(n) * time.Second, nil
}

// decodeProtocolID checks a protocol-id token and percent-decodes it.
func decodeProtocolID(s string) (string, error) {
	pct := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isTchar(c) {
			return "", fmt.Errorf("invalid character %q in protocol-id", c)
		}
		if c == '%' {
			if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
				return "", fmt.Errorf("bad percent-encoding in protocol-id %q", clip(s))
			}
			pct = true
			i += 2
		}
	}
	if !pct {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			b = append(b, byte(unhex(s[i+1])<<4|unhex(s[i+2])))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b), nil
}

// encodeProtocolID is the inverse of decodeProtocolID: octets that are not
// token characters, and '%', are percent-encoded with uppercase hex.
func encodeProtocolID(p string) string {
	clean := true
	for i := 0; i < len(p); i++ {
		if !isTchar(p[i]) || p[i] == '%' {
			clean = false
			break
		}
	}
	if clean {
		return p
	}
	const hexDigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(p)*3)
	for i := 0; i < len(p); i++ {
		c := p[i]
		if isTchar(c) && c != '%' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	return string(b)
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
