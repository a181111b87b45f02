package h1conn

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
)

// The head scanner and the key classifier were rewritten for cost
// (findHeadEnd in one pass, classifyKey from one table); these are the
// versions they replaced, kept as the reference the tests and fuzz
// targets compare them with.

// findHeadEndByTwoSearches is the former findHeadEnd: the earlier of the
// first "\n\r\n" and the first "\n\n".
func findHeadEndByTwoSearches(buf []byte) int {
	end := -1
	if i := bytes.Index(buf, []byte("\n\r\n")); i >= 0 {
		end = i + 3
	}
	search := buf
	if end >= 0 {
		search = buf[:end]
	}
	if i := bytes.Index(search, []byte("\n\n")); i >= 0 && (end < 0 || i+2 < end) {
		end = i + 2
	}
	return end
}

// classifyKeyByBranches is the former classifyKey, byte by byte.
func classifyKeyByBranches(k string) canonicalKeyState {
	if len(k) == 0 {
		return keyInvalid
	}
	state := keyCanonical
	hasSpace := false
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !IsTokenByte(c) {
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
		return keyCanonical
	}
	return state
}

func TestFindHeadEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", -1},
		{"\n", -1},
		{"\r\n", -1},
		{"\n\n", 2},
		{"\n\r\n", 3},
		{"\n\r", -1},
		{"HTTP/1.1 200 OK\r\n", -1},
		{"HTTP/1.1 200 OK\r\n\r", -1},
		{"HTTP/1.1 200 OK\r\n\r\n", 19},
		{"HTTP/1.1 200 OK\r\n\r\nbody\r\n\r\n", 19},
		{"HTTP/1.1 200 OK\nA: b\n\nbody", 22},
		{"HTTP/1.1 200 OK\r\nA: b\n\r\n", 24},
		{"HTTP/1.1 200 OK\r\nA: b\r\n\n", 24},
		{"HTTP/1.1 200 OK\r\nA: b\r\r\n\r\n", 26},
		{"\r\n\r\n", 4},
		{"a\n\r\r\n\n", 6},
	} {
		if got := findHeadEnd([]byte(c.in)); got != c.want {
			t.Errorf("findHeadEnd(%q) = %d, want %d", c.in, got, c.want)
		}
		if ref := findHeadEndByTwoSearches([]byte(c.in)); ref != c.want {
			t.Errorf("reference(%q) = %d, want %d (the table is wrong)", c.in, ref, c.want)
		}
	}
}

// TestClassifyKeyExhaustive compares classifyKey with the
// reference on every key of up to three bytes over every byte value that
// classifies differently (letters of both cases, '-', a space, another
// token byte, bytes that are not allowed, a byte above 127), and on longer
// keys built from them.
func TestClassifyKeyExhaustive(t *testing.T) {
	alphabet := []byte{'a', 'z', 'A', 'Z', '-', ' ', '0', '!', '~', ':', '\t', 0, 0x7f, 0x80, 0xff, '"', '@'}
	var check func(prefix []byte, depth int)
	check = func(prefix []byte, depth int) {
		k := string(prefix)
		if got, want := classifyKey(k), classifyKeyByBranches(k); got != want {
			t.Fatalf("classifyKey(%q) = %d, reference %d", k, got, want)
		}
		if depth == 0 {
			return
		}
		for _, c := range alphabet {
			check(append(prefix, c), depth-1)
		}
	}
	check(nil, 3)
	for _, k := range []string{
		"Content-Length", "content-length", "CONTENT-LENGTH", "Content-length",
		"X-Request-Id", "x-request-ID", "Www-Authenticate", "A-B-C-D", "a--b",
		"-a", "Content Length", "content length", "Content-Length ", "Foo\x80",
		"Host:", "X_Forwarded_For", "x_forwarded_for",
	} {
		if got, want := classifyKey(k), classifyKeyByBranches(k); got != want {
			t.Errorf("classifyKey(%q) = %d, reference %d", k, got, want)
		}
	}
}

func FuzzHeadScan(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\nA: b\n\n",
		"a\n\r\r\n\n",
		"content-type",
		"X Y",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := findHeadEnd(data), findHeadEndByTwoSearches(data); got != want {
			t.Fatalf("findHeadEnd(%q) = %d, reference %d", data, got, want)
		}
		if got, want := classifyKey(string(data)), classifyKeyByBranches(string(data)); got != want {
			t.Fatalf("classifyKey(%q) = %d, reference %d", data, got, want)
		}
	})
}

// TestHeadRepeatedKeys: the key filter only decides whether the map
// is asked; a repeated key gathers its values in order, and a key that
// shares a filter bit with an earlier, different key is a key of its own.
func TestHeadRepeatedKeys(t *testing.T) {
	// Two different keys with the same filter bit, found by search so
	// that the test keeps meaning it if keyFilterBit changes.
	var a, b string
	seen := map[uint64]string{}
	for i := 0; a == ""; i++ {
		k := "X-K" + strconv.Itoa(i)
		bit := keyFilterBit(k)
		if prev, ok := seen[bit]; ok {
			a, b = prev, k
		}
		seen[bit] = k
	}
	head := "Set-Cookie: 1\r\n" + a + ": a1\r\nContent-Type: text/plain\r\n" + b + ": b1\r\n" +
		"Set-Cookie: 2\r\n" + a + ": a2\r\nset-cookie: 3\r\n" + b + ": b2\r\n\r\n"
	want := http.Header{
		"Set-Cookie":   {"1", "2", "3"},
		a:              {"a1", "a2"},
		b:              {"b1", "b2"},
		"Content-Type": {"text/plain"},
	}
	for _, spare := range [][]string{nil, make([]string, 2), make([]string, 16)} {
		h, n, _, err := parseHeaderFieldsInto(head, 2, spare)
		if err != nil || n != 8 || !equalHeader(h, want) {
			t.Errorf("spare %d: got %v, %d fields, %v; want %v", len(spare), h, n, err, want)
		}
		ref, err := textproto.NewReader(bufio.NewReader(strings.NewReader(head))).ReadMIMEHeader()
		if err != nil || !equalHeader(http.Header(ref), want) {
			t.Errorf("textproto reads %v, %v (the test's expectation is wrong)", ref, err)
		}
	}
}

// TestValidValueTable: validValue agrees with validValueByte on every
// byte, alone and inside a longer value.
func TestValidValueTable(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, v := range []string{string([]byte{byte(c)}), "text/" + string([]byte{byte(c)}) + "plain"} {
			if got, want := validValue(v), validValueByte(byte(c)); got != want {
				t.Errorf("validValue(%q) = %v, want %v", v, got, want)
			}
		}
	}
	if !validValue("") || !validValue("a\tb c\x80\xff") {
		t.Error("valid values refused")
	}
}
