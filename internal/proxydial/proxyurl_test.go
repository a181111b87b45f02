package proxydial

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestAddr(t *testing.T) {
	cases := []struct {
		in, want string
		err      bool
	}{
		{"http://proxy.example", "proxy.example:80", false},
		{"https://proxy.example", "proxy.example:443", false},
		{"socks5://proxy.example", "proxy.example:1080", false},
		{"SOCKS5H://Proxy.Example:9050", "proxy.example:9050", false},
		{"//proxy.example", "proxy.example:80", false},
		{"http://u:p@[::1]:3128", "[::1]:3128", false},
		{"http://[::1]", "[::1]:80", false},
		{"ftp://proxy.example", "", true},
		{"http://:8080", "", true},
		{"http:///path", "", true},
	}
	for _, tc := range cases {
		got, err := Addr(mustURL(t, tc.in))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Addr(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	var use *UnsupportedSchemeError
	if _, err := Addr(mustURL(t, "ftp://x")); !errors.As(err, &use) || use.Scheme != "ftp" {
		t.Errorf("want *UnsupportedSchemeError, got %v", err)
	}
	if _, err := Addr(nil); !errors.Is(err, ErrNoProxyHost) {
		t.Errorf("Addr(nil) = %v", err)
	}
	if _, err := Tunnel(t.Context(), mustURL(t, "ftp://127.0.0.1:1"), "127.0.0.1:9", nil); !errors.As(err, &use) {
		t.Errorf("Tunnel with ftp proxy: %v", err)
	}
	if _, err := Tunnel(t.Context(), mustURL(t, "http://127.0.0.1:1"), "no-port", nil); err == nil {
		t.Error("Tunnel accepted a target without a port")
	}
}

func TestForwards(t *testing.T) {
	cases := []struct {
		proxy, target string
		want          bool
	}{
		{"http://p:1", "http", true},
		{"https://p:1", "http", true},
		{"//p:1", "http", true},
		{"http://p:1", "https", false},
		{"https://p:1", "https", false},
		{"socks5://p:1", "http", false},
		{"socks5h://p:1", "http", false},
		{"ftp://p:1", "http", false},
	}
	for _, tc := range cases {
		if got := Forwards(mustURL(t, tc.proxy), tc.target); got != tc.want {
			t.Errorf("Forwards(%s, %s) = %v", tc.proxy, tc.target, got)
		}
	}
	if Forwards(nil, "http") {
		t.Error("Forwards(nil) = true")
	}
}

func TestAuthHeader(t *testing.T) {
	cases := []struct{ proxy, want string }{
		{"http://p:1", ""},
		{"http://user:pa%3Ass@p:1", "Basic " + base64.StdEncoding.EncodeToString([]byte("user:pa:ss"))},
		{"http://user@p:1", "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"))},
		{"http://:pw@p:1", "Basic " + base64.StdEncoding.EncodeToString([]byte(":pw"))},
	}
	for _, tc := range cases {
		if got := AuthHeader(mustURL(t, tc.proxy)); got != tc.want {
			t.Errorf("AuthHeader(%s) = %q, want %q", tc.proxy, got, tc.want)
		}
	}
	if AuthHeader(nil) != "" {
		t.Error("AuthHeader(nil) not empty")
	}
}

func TestKey(t *testing.T) {
	key := func(s string) Key {
		k, err := KeyOf(mustURL(t, s))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	same := [][2]string{
		{"http://p:80", "http://P"},
		{"HTTP://p", "//p:80"},
		{"http://u:pw@p", "http://u:pw@p:80/ignored/path"},
	}
	for _, c := range same {
		if key(c[0]) != key(c[1]) {
			t.Errorf("KeyOf(%s) != KeyOf(%s)", c[0], c[1])
		}
	}
	differ := [][2]string{
		{"http://p", "https://p"},
		{"http://p", "http://p:81"},
		{"http://p", "http://q"},
		{"http://u:pw@p", "http://u:other@p"},
		{"http://u:pw@p", "http://p"},
		{"http://u:pw@p", "http://v:pw@p"},
		{"socks5://p", "socks5h://p"},
	}
	for _, c := range differ {
		if key(c[0]) == key(c[1]) {
			t.Errorf("KeyOf(%s) == KeyOf(%s)", c[0], c[1])
		}
	}
	if k, err := KeyOf(nil); err != nil || k != (Key{}) {
		t.Errorf("KeyOf(nil) = %v, %v", k, err)
	}
	if _, err := KeyOf(mustURL(t, "gopher://p")); err == nil {
		t.Error("KeyOf accepted an unsupported scheme")
	}
	k := key("http://" + testUser + ":" + testPassword + "@proxy.example:3128")
	type poolKey struct {
		proxy  Key
		scheme string
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for _, v := range []any{k, poolKey{k, "https"}, &poolKey{k, "https"}} {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, testPassword) || strings.Contains(out, testUser) {
				t.Errorf("Sprintf(%s, %T) leaks credentials: %s", verb, v, out)
			}
		}
	}
	if got := k.String(); !strings.HasPrefix(got, "http://proxy.example:3128 (credentials ") {
		t.Errorf("String() = %q", got)
	}
}

// TestAbsoluteURIMatchesWriteProxy compares AbsoluteURI with the request
// line net/http's Request.WriteProxy writes.
func TestAbsoluteURIMatchesWriteProxy(t *testing.T) {
	cases := []struct{ url, host string }{
		{"http://example.com/", ""},
		{"http://example.com", ""},
		{"http://example.com:8080/a/b?x=1&y=%20", ""},
		{"http://example.com/a%2Fb/c", ""},
		{"http://example.com/p", "virtual.example:81"},
		{"http://[::1]:8080/p?q", ""},
		{"http://example.com/?", ""},
	}
	for _, tc := range cases {
		req, err := http.NewRequest("GET", tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		var buf bytes.Buffer
		if err := req.WriteProxy(&buf); err != nil {
			t.Fatal(err)
		}
		line, _, _ := strings.Cut(buf.String(), "\r\n")
		host := req.Host
		if host == "" {
			host = req.URL.Host
		}
		want := strings.TrimSuffix(strings.TrimPrefix(line, "GET "), " HTTP/1.1")
		if got := AbsoluteURI(req.URL, host); got != want {
			t.Errorf("AbsoluteURI(%s, %s) = %q; WriteProxy wrote %q", tc.url, host, got, want)
		}
	}
	opaque := &url.URL{Scheme: "http", Opaque: "//example.com/raw%2Fpath"}
	if got := AbsoluteURI(opaque, "example.com"); got != opaque.RequestURI() {
		t.Errorf("opaque: %q", got)
	}
}
