package altsvc

import (
	"errors"
	"testing"
)

func TestParseOrigin(t *testing.T) {
	tests := []struct {
		in      string
		want    string // Origin.String(); "" when an error is expected
		wantErr error
	}{
		{"https://example.com", "https://example.com:443", nil},
		{"https://Example.COM", "https://example.com:443", nil},
		{"HTTPS://example.com:443", "https://example.com:443", nil},
		{"https://example.com:8443/path?q#f", "https://example.com:8443", nil},
		{"https://example.com:", "https://example.com:443", nil},
		{"https://bücher.example", "https://xn--bcher-kva.example:443", nil},
		{"https://BÜCHER.example", "https://xn--bcher-kva.example:443", nil},
		{"https://xn--bcher-kva.example", "https://xn--bcher-kva.example:443", nil},
		{"https://127.0.0.1:8443", "https://127.0.0.1:8443", nil},
		{"https://[::1]", "https://[::1]:443", nil},
		{"https://[::1]:8443", "https://[::1]:8443", nil},
		{"https://[0:0:0:0:0:0:0:1]:8443", "https://[::1]:8443", nil},
		{"https://[2001:DB8::1]", "https://[2001:db8::1]:443", nil},
		{"https://example.com.", "https://example.com.:443", nil},
		{"http://example.com", "", ErrNotHTTPS},
		{"ws://example.com", "", ErrNotHTTPS},
		{"example.com", "", ErrInvalidOrigin},
		{"https://", "", ErrInvalidOrigin},
		{"https://user@example.com", "", ErrInvalidOrigin},
		{"https://example.com:0", "", ErrInvalidOrigin},
		{"https://example.com:65536", "", ErrInvalidOrigin},
		{"https://example.com:-1", "", ErrInvalidOrigin},
		{"https://exa mple.com", "", ErrInvalidOrigin},
		{"https://a..b", "", ErrInvalidOrigin},
		{"https://::1", "", ErrInvalidOrigin},
		{"https://[::1", "", ErrInvalidOrigin},
		{"https://[1.2.3.4]", "", ErrInvalidOrigin},
		{"https://[::1]x", "", ErrInvalidOrigin},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			o, err := ParseOrigin(tc.in)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ParseOrigin(%q) = %v, %v; want error %v", tc.in, o, err, tc.wantErr)
				}
				if !o.IsZero() {
					t.Errorf("failed ParseOrigin returned non-zero origin %v", o)
				}
				return
			}
			if err != nil || o.String() != tc.want {
				t.Fatalf("ParseOrigin(%q) = %q, %v; want %q", tc.in, o, err, tc.want)
			}
		})
	}
}

func TestOriginSpellingsAreEqual(t *testing.T) {
	a, err1 := ParseOrigin("https://Example.COM")
	b, err2 := ParseOrigin("https://example.com:443")
	c, err3 := NewOrigin("HTTPS", "EXAMPLE.com", 0)
	d, err4 := OriginFromHostPort("https", "example.com:443")
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	if a != b || b != c || c != d {
		t.Fatalf("origins differ: %v %v %v %v", a, b, c, d)
	}
	if a.Host() != "example.com" || a.Port() != 443 {
		t.Errorf("Host/Port = %q/%d", a.Host(), a.Port())
	}
}

func TestNewOrigin(t *testing.T) {
	tests := []struct {
		scheme, host string
		port         int
		want         string
		wantErr      error
	}{
		{"https", "example.com", 0, "https://example.com:443", nil},
		{"https", "::1", 8443, "https://[::1]:8443", nil},
		{"https", "[::1]", 8443, "https://[::1]:8443", nil},
		{"https", "", 443, "", ErrInvalidOrigin},
		{"https", "example.com", 70000, "", ErrInvalidOrigin},
		{"http", "example.com", 80, "", ErrNotHTTPS},
	}
	for _, tc := range tests {
		o, err := NewOrigin(tc.scheme, tc.host, tc.port)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("NewOrigin(%q, %q, %d) error = %v, want %v", tc.scheme, tc.host, tc.port, err, tc.wantErr)
			}
			continue
		}
		if err != nil || o.String() != tc.want {
			t.Errorf("NewOrigin(%q, %q, %d) = %q, %v; want %q", tc.scheme, tc.host, tc.port, o, err, tc.want)
		}
	}
	var zero Origin
	if !zero.IsZero() || zero.String() != "" {
		t.Errorf("zero Origin: IsZero=%v String=%q", zero.IsZero(), zero.String())
	}
}

func TestOriginFromNormalisedInputDoesNotAllocate(t *testing.T) {
	for _, in := range []struct{ scheme, hostport string }{
		{"https", "example.com"},
		{"https", "example.com:8443"},
		{"https", "[::1]:8443"},
		{"https", "127.0.0.1:443"},
	} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := OriginFromHostPort(in.scheme, in.hostport); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("OriginFromHostPort(%q, %q) allocates %v times", in.scheme, in.hostport, allocs)
		}
	}
}
