package h3conn

import (
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestAddHeaders: what addHeaders hands quic-go for each kind of request:
// the fields net/http adds, under lower-case names (quic-go lower-cases
// every name it encodes, allocating for any other), the caller's own
// fields unchanged and sharing their values, and the caller's map never
// modified (it is copied when anything is added, used as is otherwise).
func TestAddHeaders(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		header   http.Header
		noGzip   bool // Config.DisableCompression
		wantGzip bool
		added    string // fields added, "name=value" sorted, space separated
	}{
		{name: "plain_get", method: "GET", wantGzip: true, added: "accept-encoding=gzip user-agent=Go-http-client/3.0"},
		{name: "caller_ua", method: "GET", header: http.Header{"User-Agent": {"app/1"}, "X-A": {"1", "2"}}, wantGzip: true, added: "accept-encoding=gzip"},
		{name: "empty_ua", method: "GET", header: http.Header{"User-Agent": {""}}, wantGzip: true, added: "accept-encoding=gzip"},
		{name: "caller_accept_encoding", method: "GET", header: http.Header{"Accept-Encoding": {"br"}}, added: "user-agent=Go-http-client/3.0"},
		{name: "range", method: "GET", header: http.Header{"Range": {"bytes=0-"}}, added: "user-agent=Go-http-client/3.0"},
		{name: "head", method: "HEAD", added: "user-agent=Go-http-client/3.0"},
		{name: "compression_off", method: "GET", noGzip: true, added: "user-agent=Go-http-client/3.0"},
		{name: "nothing_added", method: "GET", noGzip: true, header: http.Header{"User-Agent": {"app/1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDialer(Config{DisableCompression: tc.noGzip})
			defer d.Close()
			c := &Conn{d: d}
			req, err := http.NewRequest(tc.method, "https://example.test/", nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			before := req.Header.Clone()
			r := req.WithContext(req.Context())
			gzip := c.addHeaders(r)
			if gzip != tc.wantGzip {
				t.Errorf("gzip asked = %v, want %v", gzip, tc.wantGzip)
			}
			if !reflect.DeepEqual(req.Header, before) {
				t.Errorf("caller's header changed: %v, was %v", req.Header, before)
			}
			var added []string
			for k, v := range r.Header {
				if own, ok := req.Header[k]; ok {
					if len(own) > 0 && &own[0] != &v[0] {
						t.Errorf("%s: value copied, not shared", k)
					}
					continue
				}
				if strings.ToLower(k) != k {
					t.Errorf("added field %q is not lower case: quic-go allocates to convert it", k)
				}
				added = append(added, fmt.Sprintf("%s=%s", k, strings.Join(v, ",")))
			}
			sort.Strings(added)
			if got := strings.Join(added, " "); got != tc.added {
				t.Errorf("added %q, want %q", got, tc.added)
			}
			if len(r.Header) != len(req.Header)+len(added) {
				t.Errorf("sent %d fields, want the caller's %d and %d added", len(r.Header), len(req.Header), len(added))
			}
		})
	}
}

// TestDecodeResponse: the length and gzip rules of net/http's HTTP/1.1
// client (transfer.go): a 204 or 304 has ContentLength 0 whatever its
// Content-Length header says (the header stays), HEAD keeps the declared
// length, and only a response with a body that gzip was asked for is
// decoded.
func TestDecodeResponse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		status   int
		cl       int64
		encoding string
		asked    bool
		want     string
	}{
		{"304_with_length", "GET", 304, 10, "gzip", true, "cl=0 uncompressed=false encoding=gzip"},
		{"304_without_length", "GET", 304, -1, "gzip", true, "cl=0 uncompressed=false encoding=gzip"},
		{"204_without_length", "GET", 204, -1, "", true, "cl=0 uncompressed=false encoding="},
		{"empty_200", "GET", 200, 0, "gzip", true, "cl=0 uncompressed=false encoding=gzip"},
		{"gzip_any_case", "GET", 200, 5, "GZIP", true, "cl=-1 uncompressed=true encoding="},
		{"gzip_not_asked", "GET", 200, 5, "gzip", false, "cl=5 uncompressed=false encoding=gzip"},
		{"head", "HEAD", 200, 5, "gzip", true, "cl=5 uncompressed=false encoding=gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, ContentLength: tc.cl, Header: http.Header{}, Body: http.NoBody}
			if tc.encoding != "" {
				resp.Header.Set("Content-Encoding", tc.encoding)
			}
			decodeResponse(resp, tc.method, tc.asked)
			got := fmt.Sprintf("cl=%d uncompressed=%v encoding=%s", resp.ContentLength, resp.Uncompressed, resp.Header.Get("Content-Encoding"))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
