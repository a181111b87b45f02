package h1conn

// Header key interning.
//
// Response header keys are canonicalized (textproto rules). A key that
// arrives already canonical is used as a substring of the response head's
// single backing string, which costs nothing. A key that arrives in another
// case (many proxies and HTTP/2 gateways send lower case) is folded into a
// stack buffer and looked up in commonHeaderKeys, so the common keys map to
// constant strings without allocating; only uncommon non-canonical keys
// allocate.

// commonHeaderKeys maps the canonical form of frequent header keys to a
// constant string of the same text. Lookups with string(b) do not allocate.
var commonHeaderKeys = func() map[string]string {
	keys := []string{
		"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language",
		"Accept-Ranges", "Access-Control-Allow-Credentials",
		"Access-Control-Allow-Headers", "Access-Control-Allow-Methods",
		"Access-Control-Allow-Origin", "Access-Control-Expose-Headers",
		"Access-Control-Max-Age", "Age", "Allow", "Alt-Svc", "Authorization",
		"Cache-Control", "Cf-Cache-Status", "Cf-Ray", "Connection",
		"Content-Disposition", "Content-Encoding", "Content-Language",
		"Content-Length", "Content-Location", "Content-Range",
		"Content-Security-Policy", "Content-Type", "Cookie", "Date", "Etag",
		"Expect", "Expires", "Keep-Alive", "Last-Modified", "Link", "Location",
		"Nel", "Pragma", "Proxy-Authenticate", "Proxy-Connection",
		"Referrer-Policy", "Report-To", "Retry-After", "Server", "Server-Timing",
		"Set-Cookie", "Strict-Transport-Security", "Te", "Timing-Allow-Origin",
		"Trailer", "Transfer-Encoding", "Upgrade", "Vary", "Via",
		"Www-Authenticate", "X-Cache", "X-Content-Type-Options",
		"X-Frame-Options", "X-Powered-By", "X-Request-Id", "X-Xss-Protection",
	}
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = k
	}
	return m
}()

// IsTokenByte reports whether c may appear in an HTTP token (RFC 9110 5.6.2).
func IsTokenByte(c byte) bool {
	return c < 128 && tokenTable[c]
}

var tokenTable = func() [128]bool {
	var t [128]bool
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// canonicalKeyState classifies a header key: isCanonical (use as is),
// needsFold (valid but in another case) or invalid.
type canonicalKeyState uint8

const (
	keyInvalid canonicalKeyState = iota
	keyCanonical
	keyNeedsFold
)

// Classes of a header key's bytes, the low four bits of keyByteClass.
const (
	kcAllowed = 1 << iota // a token byte, or a space (see classifyKey)
	kcLower               // 'a'-'z'
	kcUpper               // 'A'-'Z'
	kcSpace               // ' '
)

// keyByteClass holds, for each byte, its classes (low four bits) and, in
// the high four bits, the class bits that would be wrong in the position
// after it: a lower-case letter after '-' (which starts a word), an
// upper-case one after anything else; with kcSpace, which is always noted.
var keyByteClass = func() [256]uint8 {
	const nextWrong = (kcUpper | kcSpace) << 4
	const nextWrongAfterDash = (kcLower | kcSpace) << 4
	var t [256]uint8
	for c := range t {
		t[c] = nextWrong
		if c < 128 && tokenTable[c] {
			t[c] |= kcAllowed
		}
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= kcLower
		t[c-'a'+'A'] |= kcUpper
	}
	t[' '] |= kcAllowed | kcSpace
	t['-'] = kcAllowed | nextWrongAfterDash
	return t
}()

// classifyKey reports whether k is a valid token and whether it is already
// in canonical form (first letter and letters after '-' upper case, the
// others lower case). A key with a space in it is valid but left as it is
// (textproto accepts a space before the colon, go.dev/issue/34540, and
// does not fold such a key).
//
// One table load per byte and no branch inside the loop: every byte must
// be allowed, and a space or a letter in the wrong case for its position
// is noted; the table says what is wrong at the next position. The loop
// is 11 instructions per byte (its amd64 assembly); the byte-by-byte
// version with branches measured about 20 (callgrind,
// BenchmarkRoundTripInMemory: 944 instructions for four keys of 44 bytes).
func classifyKey(k string) canonicalKeyState {
	if len(k) == 0 {
		return keyInvalid
	}
	all := uint8(kcAllowed)           // loses kcAllowed at the first byte not allowed
	seen := uint8(0)                  // kcSpace, and case bits found where wrong
	wrong := uint8(kcLower | kcSpace) // what to note at this position
	for i := range len(k) {
		class := keyByteClass[k[i]]
		all &= class
		seen |= class & wrong
		wrong = class >> 4
	}
	switch {
	case all&kcAllowed == 0:
		return keyInvalid
	case seen&kcSpace != 0:
		return keyCanonical
	case seen != 0:
		return keyNeedsFold
	}
	return keyCanonical
}

// foldKey returns the canonical form of the valid token k, interned when it
// is a common key. It allocates only for uncommon keys.
func foldKey(k string) string {
	var stack [64]byte
	var buf []byte
	if len(k) <= len(stack) {
		buf = stack[:len(k)]
	} else {
		buf = make([]byte, len(k))
	}
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
		upper = c == '-'
	}
	if s, ok := commonHeaderKeys[string(buf)]; ok {
		return s
	}
	return string(buf)
}
