package transport

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

// isTokenByte reports whether c may appear in an HTTP token (RFC 9110 5.6.2).
func isTokenByte(c byte) bool {
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

// classifyKey reports whether k is a valid token and whether it is already
// in canonical form (first letter and letters after '-' upper case, the
// others lower case).
func classifyKey(k string) canonicalKeyState {
	if len(k) == 0 {
		return keyInvalid
	}
	state := keyCanonical
	hasSpace := false
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !isTokenByte(c) {
			if c == ' ' {
				hasSpace = true
				continue
			}
			return keyInvalid
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			state = keyNeedsFold
		}
		upper = c == '-'
	}
	if hasSpace {
		// textproto accepts a space before the colon (go.dev/issue/34540)
		// but leaves such a key as it is.
		return keyCanonical
	}
	return state
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
