package altsvc

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DefaultPort is the port of an https origin that names none.
const DefaultPort = 443

// ErrNotHTTPS is returned (wrapped) for an origin whose scheme is not https:
// RFC 7838 section 2.1 gives alternatives to https origins only here.
var ErrNotHTTPS = errors.New("altsvc: only https origins have alternative services")

// ErrInvalidOrigin is returned (wrapped) for an origin whose host or port
// cannot be normalised, and for a zero [Origin] passed to a [Cache] write.
var ErrInvalidOrigin = errors.New("altsvc: invalid origin")

// Origin is a normalised https origin: the key of the cache.
//
// Its host is lowercase ASCII (internationalised names are converted to their
// IDNA A-label form), IPv6 literals are kept in canonical form without
// brackets, and the port is always explicit (443 when the URL names none). Two
// spellings of one origin, such as `https://Example.COM` and
// `https://example.com:443`, build equal Origin values, so Origin is
// comparable with ==.
//
// The zero Origin names no origin: lookups for it find nothing and writes for
// it fail with [ErrInvalidOrigin]. Build one with [NewOrigin],
// [OriginFromHostPort] or [ParseOrigin].
type Origin struct {
	host string
	port uint16
}

// NewOrigin builds the normalised Origin for scheme, host and port. Port 0
// means the default port 443. Host may be a DNS name (any case, Unicode
// allowed), an IPv4 literal or an IPv6 literal with or without brackets.
//
// When scheme is "https" and host is already normalised (lowercase ASCII, or
// a canonical IPv6 literal) NewOrigin does not allocate. It returns an error
// wrapping [ErrNotHTTPS] for another scheme and [ErrInvalidOrigin] for a bad
// host or port.
func NewOrigin(scheme, host string, port int) (Origin, error) {
	if err := checkScheme(scheme); err != nil {
		return Origin{}, err
	}
	if port == 0 {
		port = DefaultPort
	}
	if port < 0 || port > 65535 {
		return Origin{}, fmt.Errorf("%w: port %d out of range", ErrInvalidOrigin, port)
	}
	h, err := normaliseHost(host)
	if err != nil {
		return Origin{}, fmt.Errorf("%w: %w", ErrInvalidOrigin, err)
	}
	return Origin{host: h, port: uint16(port)}, nil
}

// OriginFromHostPort builds the Origin for scheme and an authority in the
// form of url.URL.Host: "host", "host:port", "[v6]" or "[v6]:port". A missing
// or empty port means 443. Like [NewOrigin] it does not allocate for an
// already-normalised https authority, and fails with the same errors.
func OriginFromHostPort(scheme, hostport string) (Origin, error) {
	if err := checkScheme(scheme); err != nil {
		return Origin{}, err
	}
	host, portStr, err := splitAuthority(hostport)
	if err != nil {
		return Origin{}, fmt.Errorf("%w: %w", ErrInvalidOrigin, err)
	}
	port := DefaultPort
	if portStr != "" {
		if port, err = parsePort(portStr); err != nil {
			return Origin{}, fmt.Errorf("%w: %w", ErrInvalidOrigin, err)
		}
	}
	h, err := normaliseHost(host)
	if err != nil {
		return Origin{}, fmt.Errorf("%w: %w", ErrInvalidOrigin, err)
	}
	return Origin{host: h, port: uint16(port)}, nil
}

// ParseOrigin builds the Origin of a URL or origin string such as
// "https://Example.COM" or "https://[::1]:8443/path". Anything after the
// authority (path, query, fragment) is ignored; user information is
// rejected. It fails with errors wrapping [ErrNotHTTPS] or [ErrInvalidOrigin].
func ParseOrigin(s string) (Origin, error) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return Origin{}, fmt.Errorf("%w: %q has no scheme", ErrInvalidOrigin, s)
	}
	authority := s[i+3:]
	if j := strings.IndexAny(authority, "/?#"); j >= 0 {
		authority = authority[:j]
	}
	if strings.IndexByte(authority, '@') >= 0 {
		return Origin{}, fmt.Errorf("%w: %q has user information", ErrInvalidOrigin, s)
	}
	return OriginFromHostPort(s[:i], authority)
}

// Host returns the normalised host: lowercase ASCII, or an IPv6 literal
// without brackets. It is "" for the zero Origin.
func (o Origin) Host() string { return o.host }

// Port returns the explicit port (443 by default); 0 for the zero Origin.
func (o Origin) Port() int { return int(o.port) }

// IsZero reports whether o is the zero Origin, which names no origin.
func (o Origin) IsZero() bool { return o.host == "" }

// String returns the origin serialised as "https://host:port" with IPv6
// literals in brackets, or "" for the zero Origin.
func (o Origin) String() string {
	if o.host == "" {
		return ""
	}
	return "https://" + joinHostPort(o.host, int(o.port))
}

// joinHostPort formats host and port, bracketing IPv6 literals.
func joinHostPort(host string, port int) string {
	if strings.IndexByte(host, ':') >= 0 {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

func checkScheme(scheme string) error {
	if scheme == "https" || strings.EqualFold(scheme, "https") {
		return nil
	}
	return fmt.Errorf("%w: scheme %q", ErrNotHTTPS, scheme)
}

// splitAuthority splits "host[:port]" or "[v6][:port]" without allocating.
func splitAuthority(hostport string) (host, port string, err error) {
	if hostport == "" {
		return "", "", errors.New("empty host")
	}
	if hostport[0] == '[' {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", "", fmt.Errorf("missing ']' in %q", hostport)
		}
		rest := hostport[end+1:]
		switch {
		case rest == "":
		case rest[0] == ':':
			port = rest[1:]
		default:
			return "", "", fmt.Errorf("unexpected %q after IPv6 literal", rest)
		}
		return hostport[:end+1], port, nil
	}
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return hostport, "", nil
	}
	if strings.IndexByte(hostport[:i], ':') >= 0 {
		return "", "", fmt.Errorf("IPv6 literal %q needs brackets", hostport)
	}
	return hostport[:i], hostport[i+1:], nil
}

// parsePort parses a decimal port in 1..65535.
func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, fmt.Errorf("invalid port %q", s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("invalid port %q", s)
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q out of range", s)
	}
	return n, nil
}

// maxHostLen bounds a DNS name (RFC 1035) and keeps keys small.
const maxHostLen = 253

// normaliseHost returns the cache form of a host: lowercase ASCII DNS name
// (IDNA A-labels for Unicode names) or a canonical IPv6 literal without
// brackets. It returns host itself, without allocating, when host is already
// in that form.
func normaliseHost(host string) (string, error) {
	if host == "" {
		return "", errors.New("empty host")
	}
	if host[0] == '[' {
		if len(host) < 2 || host[len(host)-1] != ']' {
			return "", fmt.Errorf("malformed IPv6 literal %q", host)
		}
		return normaliseIPv6(host[1 : len(host)-1])
	}
	if strings.IndexByte(host, ':') >= 0 {
		return normaliseIPv6(host)
	}
	upper, nonASCII := false, false
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_':
		case 'A' <= c && c <= 'Z':
			upper = true
		case c >= utf8.RuneSelf:
			nonASCII = true
		default:
			return "", fmt.Errorf("invalid character %q in host %q", c, host)
		}
	}
	switch {
	case nonASCII:
		a, err := idna.Lookup.ToASCII(host)
		if err != nil {
			return "", fmt.Errorf("IDNA conversion of %q: %w", host, err)
		}
		host = a
	case upper:
		host = strings.ToLower(host)
	}
	if err := checkLabels(host); err != nil {
		return "", err
	}
	return host, nil
}

// checkLabels rejects names that are too long or have empty or oversized
// labels; one trailing dot (a fully qualified name) is allowed.
func checkLabels(host string) error {
	if len(host) > maxHostLen+1 {
		return fmt.Errorf("host %.40q... too long", host)
	}
	name := strings.TrimSuffix(host, ".")
	if name == "" {
		return fmt.Errorf("invalid host %q", host)
	}
	start := 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '.' {
			continue
		}
		if n := i - start; n == 0 || n > 63 {
			return fmt.Errorf("invalid label in host %q", host)
		}
		start = i + 1
	}
	return nil
}

// normaliseIPv6 returns the canonical text of an IPv6 literal (no brackets),
// reusing s when it is already canonical.
func normaliseIPv6(s string) (string, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil || !addr.Is6() {
		return "", fmt.Errorf("invalid IPv6 literal %q", s)
	}
	var buf [64]byte
	canon := addr.AppendTo(buf[:0])
	if string(canon) == s {
		return s, nil
	}
	return string(canon), nil
}
