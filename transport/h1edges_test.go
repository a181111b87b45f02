package transport

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
)

// Unusual but legal requests and responses the main table does not cover,
// each matching net/http: request
// targets (opaque, "*", CONNECT, fragment, forced query, user info that a
// RoundTripper does not send), framing the caller chose, header values with
// spaces; responses with odd versions and statuses, header lines at the
// edge of the syntax, HTTP/1.0 chunking, HEAD with chunking, a
// Got1xxResponse hook that fails, and gzip bodies that are corrupt or cut
// short (their errors, and whether the connection serves the next request).
var h1MiscRows = []scenario{
	{name: "request/te-identity-post", handler: hello, run: one("POST", "/", func() io.Reader { return strings.NewReader("abc") }, func(r *http.Request) { r.TransferEncoding = []string{"identity"} })},
	{name: "request/host-ipv6-zone", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: one("GET", "/", nil, func(r *http.Request) { r.Host = "[fe80::1%eth0]:8080" })},
	{name: "request/opaque-absolute", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1HostInURI(func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "GET", srv.URL, nil)
		req.URL.Opaque = "//" + req.URL.Host + "/a%2Fb"
		return []any{observe(rt, req)}
	})},
	{name: "request/options-star", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "OPTIONS", srv.URL, nil)
		req.URL.Opaque = "*"
		return []any{observe(rt, req)}
	}},
	{name: "request/connect-direct", raw: rawRespond("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: h1HostInURI(func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "CONNECT", srv.URL, nil)
		return []any{observe(rt, req), observe(rt, newReq(t, "GET", srv.URL, nil))}
	})},
	{name: "request/fragment-and-force-query", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		return []any{observe(rt, newReq(t, "GET", srv.URL+"/p?q=1#frag", nil)), observe(rt, newReq(t, "GET", srv.URL+"/p?", nil))}
	}},
	{name: "request/userinfo-not-sent", handler: hello, run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		return []any{observe(rt, newReq(t, "GET", "http://user:pass@"+strings.TrimPrefix(srv.URL, "http://")+"/", nil))}
	}},
	{name: "response/got1xx-hook-error", raw: rawRespond("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		req := newReq(t, "GET", srv.URL, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(int, textproto.MIMEHeader) error { return errors.New("no hints") },
		}))
		return []any{observe(rt, req), observe(rt, newReq(t, "GET", srv.URL, nil))}
	}},
	{name: "request/get-with-body", handler: hello, run: one("GET", "/", func() io.Reader { return strings.NewReader("abc") }, nil)},
	{name: "request/header-value-spaces", handler: hello, run: one("GET", "/", nil, func(r *http.Request) { r.Header["X-A"] = []string{"  v  ", "\tw"} })},
	{name: "response/head-chunked", raw: rawRespond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 7\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		return []any{observe(rt, newReq(t, "HEAD", srv.URL, nil)), observe(rt, newReq(t, "GET", srv.URL, nil))}
	}},
	{name: "response/gzip-corrupt", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\n0123456789", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/gzip-truncated", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Encoding: GZIP\r\nContent-Length: 12\r\n\r\n"+string(gzipped("hello world")[:12]), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/cl-plus", raw: rawRespond("HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/status-999-blank-reason", raw: rawRespond("HTTP/1.1 999 \r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/http2-version-line", raw: rawRespond("HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/http09-version", raw: rawRespond("HTTP/0.9 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/http10-chunked-ignored", raw: rawRespondClose("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), run: gets(1, "/")},
	{name: "response/connection-close-and-keep-alive", raw: rawRespond("HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(2, "/")},
	{name: "response/empty-header-value-and-space-key", raw: rawRespond("HTTP/1.1 200 OK\r\nX-Empty:\r\nX-Sp : v\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/header-value-ctl", raw: rawRespond("HTTP/1.1 200 OK\r\nX-C: a\x01b\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/header-value-obs-text", raw: rawRespond("HTTP/1.1 200 OK\r\nX-C: caf\xe9\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/head-cut-before-blank-line", raw: rawRespondClose("HTTP/1.1 200 OK\r\nX-A: b\r\n"), run: gets(1, "/")},
	{name: "response/blank-line-before-status", raw: rawRespond("\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
	{name: "response/first-header-line-indented", raw: rawRespond("HTTP/1.1 200 OK\r\n X-A: b\r\nContent-Length: 2\r\n\r\nok"), run: gets(1, "/")},
}

// h1HostInURI runs f and writes HOST for the server's address in the
// request targets the server saw (each transport has its own server).
func h1HostInURI(f func(t *testing.T, rt http.RoundTripper, srv *testServer) []any) func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
	return func(t *testing.T, rt http.RoundTripper, srv *testServer) []any {
		out := f(t, rt, srv)
		host := strings.TrimPrefix(srv.URL, "http://")
		srv.mu.Lock()
		for i := range srv.seen {
			srv.seen[i].URI = strings.ReplaceAll(srv.seen[i].URI, host, "HOST")
		}
		srv.mu.Unlock()
		return out
	}
}

func TestH1WireEdgeCases(t *testing.T) {
	runH1Rows(t, h1MiscRows)
}
