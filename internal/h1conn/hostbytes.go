package h1conn

// Per-request checks of a request's host, one table load per byte.
//
// Every request looks at its URL's host twice: for its connection key
// (CanonicalHostPort: can "host:port" be used as it is?) and for its Host
// header (plainHostHeader: can it be sent as it is?). Done byte by byte
// with branches, CanonicalHostPort alone took 236 instructions per request
// for "127.0.0.1:<port>", and x/net's PunycodeHostPort about 100 more
// (callgrind, BenchmarkRoundTrip/ferry/h2/serial).

// Classes of a host's bytes (hostByteClass).
const (
	hcPlain        = 1 << iota // a letter, digit, '.', '-', '_', ':', '[' or ']'
	hcUpper                    // 'A'-'Z'
	hcColon                    // ':'
	hcNotCanonical             // '%' or a byte above 127: never in a canonical key
)

var hostByteClass = func() [256]uint8 {
	var t [256]uint8
	for c := 0x80; c < 256; c++ {
		t[c] = hcNotCanonical
	}
	t['%'] = hcNotCanonical
	for c := 'a'; c <= 'z'; c++ {
		t[c] = hcPlain
		t[c-'a'+'A'] = hcPlain | hcUpper
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = hcPlain
	}
	for _, c := range ".-_[]" {
		t[c] = hcPlain
	}
	t[':'] = hcPlain | hcColon
	return t
}()

// CanonicalHostPort reports whether s is "host:port" with a non-empty
// numeric port and a lower-case ASCII host (IPv6 in brackets), with no
// zone ('%'): the form connection keys hold.
func CanonicalHostPort(s string) bool {
	i := len(s) - 1
	for i >= 0 && '0' <= s[i] && s[i] <= '9' {
		i--
	}
	if i <= 0 || i == len(s)-1 || s[i] != ':' {
		return false // no port, an empty host or port, or not digits
	}
	host := s[:i]
	seen := uint8(0)
	for j := range len(host) {
		seen |= hostByteClass[host[j]]
	}
	if seen&(hcUpper|hcNotCanonical) != 0 {
		return false
	}
	return seen&hcColon == 0 || host[0] == '[' && host[len(host)-1] == ']'
}

// plainHostHeader reports whether host can go in a Host header exactly as
// it is: only letters, digits and ".-_:[]", so it is ASCII (punycode
// leaves it alone), every byte is one a Host header may carry, and it has
// no IPv6 zone to remove. Anything else takes the full path (plan).
func plainHostHeader(host string) bool {
	all := uint8(hcPlain)
	for i := range len(host) {
		all &= hostByteClass[host[i]]
	}
	return all&hcPlain != 0
}
