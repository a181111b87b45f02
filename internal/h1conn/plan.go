package h1conn

import (
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// SyncBodyLimit is the largest body written inline on the caller's
// goroutine (known to be in memory: writesInline), when the connection's
// socket certainly takes it with the head at once (Conn.inlineBound).
// Larger or streaming bodies get a writer goroutine so a server that
// answers early cannot block the write.
const SyncBodyLimit = 64 << 10

// Plan fills o with req's framing and the headers the transport adds:
// Accept-Encoding: gzip unless disableCompression, Connection: close when
// disableKeepAlives.
func Plan(req *http.Request, trace *httptrace.ClientTrace, disableCompression, disableKeepAlives bool, o *Outgoing) error {
	o.Req = req
	o.Trace = trace
	o.Method = req.Method
	if o.Method == "" {
		o.Method = "GET"
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if plainHostHeader(host) {
		o.Host = host
	} else {
		host, err := httpguts.PunycodeHostPort(host)
		if err != nil {
			return err
		}
		if !httpguts.ValidHostHeader(host) {
			host = ""
		}
		o.Host = removeZone(host)
	}

	if req.ContentLength != 0 && req.Body == nil {
		return fmt.Errorf("http: Request.ContentLength=%d with nil Body", req.ContentLength)
	}
	n := OutgoingLength(req)
	if req.Body != nil && req.Body != http.NoBody {
		o.Body = req.Body
	}
	o.ContentLength = n
	te := req.TransferEncoding
	if req.Body == nil {
		te = nil // as net/http: no body, no transfer coding
	}
	switch {
	case len(te) > 0 && te[0] == "chunked":
		o.Chunked = true
	case n < 0 && len(te) == 0 && o.Method != "CONNECT":
		o.Chunked = true
	}
	switch {
	case o.Chunked, n < 0:
	case n > 0:
		o.SendCL = true
	case o.Method == "POST" || o.Method == "PUT" || o.Method == "PATCH":
		o.SendCL = true
	case len(te) == 1 && te[0] == "identity" && o.Method != "GET" && o.Method != "HEAD":
		o.SendCL = true
	}
	if !disableCompression && firstValue(req.Header, "Accept-Encoding") == "" &&
		firstValue(req.Header, "Range") == "" && o.Method != "HEAD" {
		o.AddGzip = true
	}
	o.EmptyChunked = o.Chunked && o.Body == nil
	o.probe = n < 0 && len(te) == 0 && o.Body != nil && usuallyLacksBody(o.Method)
	o.AddClose = disableKeepAlives && !wantsClose(req) && !IsUpgradeRequest(req.Header)
	o.ExpectContinue = req.ProtoAtLeast(1, 1) && req.Body != nil && expectsContinue(req)
	o.SyncBody = WritesInline(o)
	return nil
}

// WritesInline reports whether o's body is written on the caller's
// goroutine before the response is read: no body, or a small one with a
// declared length and GetBody that is known to be in memory (the HTTP/1.1
// connection chosen then sends it to the body writer when its socket's
// send buffer cannot certainly take it: Conn.boundInline). Any other
// body, even one with GetBody, may be a stream whose producer waits for
// the response (a bidirectional exchange): net/http writes every body on
// its write goroutine while it reads the response, and so does ferry for
// those (asyncbody.go).
func WritesInline(o *Outgoing) bool {
	if o.Body == nil {
		return true
	}
	n := o.ContentLength
	return o.Req.GetBody != nil && n > 0 && n <= SyncBodyLimit && !o.Chunked && isKnownInMemory(o.Body)
}

// IsUpgradeRequest reports a request asking for a protocol switch.
func IsUpgradeRequest(h http.Header) bool {
	return firstValue(h, "Upgrade") != "" && httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade")
}

func firstValue(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// removeZone drops an IPv6 zone from a bracketed host (RFC 6874).
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndex(host, "]")
	if i < 0 {
		return host
	}
	j := strings.LastIndex(host[:i], "%")
	if j < 0 {
		return host
	}
	return host[:j] + host[i:]
}
