package altsvc

import (
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary field values to the parser and to a cache: no
// panic, every returned service is well formed, and the cache stays bounded
// and consistent.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`h3=":443"`,
		`h3=":443"; ma=3600; persist=1, h3-29="alt.example.com:8443"`,
		`clear`,
		`w%3Dx%3Ay="[2001:db8::1]:443"; foo="bar\"baz"`,
		`h3="bücher.example:443"`,
		"h3=\":443\"\nh2=\":8443\"",
		`h3=":443, h2=":443"`,
		`,,, ; = "" %`,
	} {
		f.Add(s)
	}
	o, err := ParseOrigin("https://example.com")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		values := strings.Split(s, "\n")
		h, err := Parse(values)
		if h.Clear && len(h.Services) > 0 {
			t.Fatalf("Clear with %d services", len(h.Services))
		}
		for _, svc := range h.Services {
			if svc.Protocol == "" || svc.Port == 0 || svc.MaxAge < 0 || svc.MaxAge > maxMaxAgeSeconds*time.Second {
				t.Fatalf("malformed service %+v from %q", svc, s)
			}
			if svc.Host != "" {
				if n, err := normaliseHost(svc.Host); err != nil || n != svc.Host {
					t.Fatalf("host %q not normalised (%q, %v)", svc.Host, n, err)
				}
			}
		}
		if err != nil && countParseErrors(err) == 0 {
			t.Fatalf("error %v carries no *ParseError", err)
		}

		c, _ := newTestCache(4)
		_ = c.UpdateFromResponse(o, values, time.Second)
		_ = c.UpdateFromResponse(o, values, time.Second) // the unchanged path
		got := c.Lookup(o, nil)
		if len(got) > MaxAlternatives || c.Len() > 1 {
			t.Fatalf("cache holds %d alternatives, Len %d", len(got), c.Len())
		}
		if !h.Clear && len(got) == 0 && len(h.Services) > 0 {
			live := false
			for _, svc := range h.Services {
				live = live || svc.MaxAge > time.Second
			}
			if live {
				t.Fatalf("valid services %+v were not stored", h.Services)
			}
		}
	})
}
