package proxydial

import (
	"strings"
	"testing"
)

// TestFromEnvironment checks net/http's environment rules, including the
// localhost and loopback exception. It sets the environment, so it is not
// parallel.
func TestFromEnvironment(t *testing.T) {
	cases := []struct {
		name            string
		httpProxy       string
		httpsProxy      string
		noProxy         string
		requestMethod   string
		target, want    string
		wantErrContains string
	}{
		{name: "http target", httpProxy: "http://proxy.example:3128", target: "http://example.com/", want: "http://proxy.example:3128"},
		{name: "scheme defaults to http", httpProxy: "proxy.example:3128", target: "http://example.com/", want: "http://proxy.example:3128"},
		{name: "https target uses HTTPS_PROXY", httpProxy: "http://a:1", httpsProxy: "http://b:2", target: "https://example.com/", want: "http://b:2"},
		{name: "https target without HTTPS_PROXY", httpProxy: "http://a:1", target: "https://example.com/", want: ""},
		{name: "localhost never proxied", httpProxy: "http://a:1", target: "http://localhost:8080/", want: ""},
		{name: "loopback never proxied", httpProxy: "http://a:1", target: "http://127.0.0.1/", want: ""},
		{name: "IPv6 loopback never proxied", httpProxy: "http://a:1", target: "http://[::1]/", want: ""},
		{name: "NO_PROXY domain", httpProxy: "http://a:1", noProxy: ".example.com", target: "http://www.example.com/", want: ""},
		{name: "NO_PROXY other domain", httpProxy: "http://a:1", noProxy: ".example.org", target: "http://www.example.com/", want: "http://a:1"},
		{name: "NO_PROXY *", httpProxy: "http://a:1", noProxy: "*", target: "http://example.com/", want: ""},
		{name: "CGI refuses HTTP_PROXY", httpProxy: "http://a:1", requestMethod: "GET", target: "http://example.com/", wantErrContains: "CGI"},
		{name: "socks5 proxy", httpProxy: "socks5://s:1080", target: "http://example.com/", want: "socks5://s:1080"},
		{name: "unparsable proxy is ignored", httpProxy: "%zz", target: "http://example.com/", want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
				t.Setenv(k, "")
			}
			t.Setenv("HTTP_PROXY", tc.httpProxy)
			t.Setenv("HTTPS_PROXY", tc.httpsProxy)
			t.Setenv("NO_PROXY", tc.noProxy)
			t.Setenv("REQUEST_METHOD", tc.requestMethod)
			got, err := FromEnvironment()(mustURL(t, tc.target))
			if tc.wantErrContains != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrContains) {
					t.Fatalf("want error containing %q, got %v", tc.wantErrContains, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotS := ""
			if got != nil {
				gotS = got.String()
			}
			if gotS != tc.want {
				t.Fatalf("proxy for %s = %q, want %q", tc.target, gotS, tc.want)
			}
		})
	}
	t.Run("reads the environment on every call", func(t *testing.T) {
		t.Setenv("HTTP_PROXY", "http://first:1")
		first := FromEnvironment()
		t.Setenv("HTTP_PROXY", "http://second:2")
		second := FromEnvironment()
		a, _ := first(mustURL(t, "http://example.com/"))
		b, _ := second(mustURL(t, "http://example.com/"))
		if a == nil || b == nil || a.Host != "first:1" || b.Host != "second:2" {
			t.Fatalf("got %v and %v", a, b)
		}
	})
}
