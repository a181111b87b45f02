package h1conn

import (
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// canonicalHostPortByBranches is the former CanonicalHostPort, the
// reference for the table-driven one.
func canonicalHostPortByBranches(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return false
	}
	for j := i + 1; j < len(s); j++ {
		if s[j] < '0' || s[j] > '9' {
			return false
		}
	}
	host := s[:i]
	if strings.IndexByte(host, ':') >= 0 && !(host[0] == '[' && host[len(host)-1] == ']') {
		return false
	}
	for j := 0; j < len(host); j++ {
		c := host[j]
		if c >= 0x80 || 'A' <= c && c <= 'Z' || c == '%' {
			return false
		}
	}
	return true
}

// hostHeaderByFullPath is what plan does with a host that is not plain.
func hostHeaderByFullPath(host string) (string, error) {
	host, err := httpguts.PunycodeHostPort(host)
	if err != nil {
		return "", err
	}
	if !httpguts.ValidHostHeader(host) {
		host = ""
	}
	return removeZone(host), nil
}

// checkHostBytes compares both fast checks with their references on s.
func checkHostBytes(t *testing.T, s string) {
	t.Helper()
	if got, want := CanonicalHostPort(s), canonicalHostPortByBranches(s); got != want {
		t.Fatalf("CanonicalHostPort(%q) = %v, reference %v", s, got, want)
	}
	if plainHostHeader(s) {
		if got, err := hostHeaderByFullPath(s); err != nil || got != s {
			t.Fatalf("plainHostHeader(%q) is true, but the full path gives %q, %v", s, got, err)
		}
	}
}

// TestHostBytesExhaustive: every string of up to four bytes over bytes
// that each class treats differently, and some real hosts.
func TestHostBytesExhaustive(t *testing.T) {
	alphabet := []byte{'a', 'Z', '0', '9', ':', '[', ']', '%', '.', '-', '_', ' ', '/', 0x80, 0xc3, '@'}
	var walk func(prefix []byte, depth int)
	walk = func(prefix []byte, depth int) {
		checkHostBytes(t, string(prefix))
		if depth == 0 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c), depth-1)
		}
	}
	walk(nil, 4)
	for _, s := range []string{
		"example.com:443", "Example.com:443", "127.0.0.1:8080", "[::1]:443", "::1:443",
		"[fe80::1%25eth0]:80", "bücher.example:443", "example.com", "example.com:",
		":443", "a:b:80", "[::1]", "EXAMPLE.COM", "host_name:1", "x y:80",
	} {
		checkHostBytes(t, s)
	}
	if plainHostHeader("[fe80::1%25eth0]:80") || plainHostHeader("bücher.example") {
		t.Error("a host with a zone or a non-ASCII byte is plain")
	}
	if !plainHostHeader("Example.COM:8443") || !plainHostHeader("[::1]:443") {
		t.Error("an ordinary host is not plain")
	}
}

func FuzzHostBytes(f *testing.F) {
	for _, s := range []string{"example.com:443", "[::1]:80", "Bücher.example", "[fe80::1%25en0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkHostBytes(t, s) })
}
