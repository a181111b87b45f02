package transport

import (
	"crypto/tls"
	"net/http"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Protocol selection, computed once per Transport (in init) with net/http
// 1.26's rules, so that From(std) speaks what std would:
//
//  1. A non-nil Protocols is the exact set.
//  2. Otherwise HTTP/1 is on, and HTTP/2 is on when TLSNextProto is nil or
//     has an "h2" entry, and ForceAttemptHTTP2 is set or none of
//     TLSClientConfig, Dial, DialContext, DialTLS, DialTLSContext is; and
//     GODEBUG does not say http2client=0 (which turns HTTP/2 off whatever
//     else is set).
//  3. With HTTP/2 on, the ALPN list is TLSClientConfig.NextProtos with
//     "http/1.1" dropped if HTTP/1 is off and "h2" dropped if HTTP/2 is off,
//     then the missing enabled ones appended. With HTTP/2 off the list is
//     NextProtos as given (net/http leaves it alone), minus "h2".
//  4. A request that needs HTTP/1 (Connection: Upgrade with Upgrade:
//     websocket) uses a key of its own whose TLS handshakes offer no ALPN.
//  5. A TLSNextProto entry of the caller's for the negotiated protocol gets
//     the connection (net/http's own "h2" entry, copied by From from a used
//     http.Transport, is recognised and means "HTTP/2 by ferry").
//  6. A connection whose handshake (also one done by DialTLSContext)
//     negotiated "h2" speaks HTTP/2.
//  7. http:// URLs speak HTTP/2 with prior knowledge (h2c) when Protocols
//     has UnencryptedHTTP2 and not HTTP1.

// protoSet is the outcome of the rules for one Transport.
type protoSet struct {
	h1  bool // HTTP/1 allowed
	h2  bool // HTTP/2 over TLS allowed
	h2c bool // http:// URLs use HTTP/2 with prior knowledge
	// alpn is the ALPN list offered on ordinary keys.
	alpn []string
	// nextProto holds the caller's TLSNextProto entries (net/http's own
	// removed); nil when there are none.
	nextProto map[string]func(authority string, c *tls.Conn) http.RoundTripper
	// customTLSDial: DialTLS or DialTLSContext is set, so an https
	// connection may come back having negotiated h2 whatever h2 says.
	customTLSDial bool
	// h3: HTTP/3 may be used (DisableHTTP3 and the rest of h3Enabled
	// aside). A caller who turned HTTP/2 off explicitly (Protocols without
	// HTTP2, a TLSNextProto map without "h2", GODEBUG http2client=0) asked
	// for HTTP/1, so gets no HTTP/3 either; HTTP/2 left off only by
	// net/http's implicit rule (a TLSClientConfig or dial hook without
	// ForceAttemptHTTP2) does not keep HTTP/3 out.
	h3 bool
}

// computeProtocols applies the rules to t's fields.
func computeProtocols(t *Transport) protoSet {
	var ps protoSet
	ps.customTLSDial = t.DialTLSContext != nil || t.DialTLS != nil
	for name, fn := range t.TLSNextProto {
		if fn == nil || isNetHTTPFunc(fn) {
			continue
		}
		if ps.nextProto == nil {
			ps.nextProto = make(map[string]func(string, *tls.Conn) http.RoundTripper)
		}
		ps.nextProto[name] = fn
	}
	http2Off := godebugHTTP2ClientOff(os.Getenv("GODEBUG"))
	if t.Protocols != nil {
		ps.h1 = t.Protocols.HTTP1()
		ps.h2 = t.Protocols.HTTP2() && !http2Off
		ps.h2c = t.Protocols.UnencryptedHTTP2() && !t.Protocols.HTTP1() && !http2Off
	} else {
		ps.h1 = true
		switch {
		case http2Off:
		case t.TLSNextProto != nil:
			// An empty map is net/http's documented way to turn HTTP/2 off.
			ps.h2 = t.TLSNextProto["h2"] != nil
		case !t.ForceAttemptHTTP2 && (t.TLSClientConfig != nil || t.Dial != nil || t.DialContext != nil || ps.customTLSDial):
		default:
			ps.h2 = true
		}
	}
	switch {
	case http2Off:
	case t.Protocols != nil:
		ps.h3 = t.Protocols.HTTP2()
	case t.TLSNextProto != nil:
		ps.h3 = t.TLSNextProto["h2"] != nil
	default:
		ps.h3 = true
	}
	var given []string
	if t.TLSClientConfig != nil {
		if t.line != nil {
			// Install's adoption shares the config with
			// http.DefaultTransport and may be writing NextProtos now
			// (firstUsed); it assigns a new slice, so the one read here
			// stays as read.
			adoptedNextProtosMu.Lock()
			given = t.TLSClientConfig.NextProtos
			adoptedNextProtosMu.Unlock()
		} else {
			given = t.TLSClientConfig.NextProtos
		}
	}
	if f := t.fixedProtos; f != nil {
		// A Transport Install built for an adopted transport whose
		// settings changed after its first use: net/http fixed the
		// protocols then and offers the ALPN list of whatever
		// TLSClientConfig is set now as it is.
		ps.h1, ps.h2, ps.h2c, ps.h3 = f.h1, f.h2, f.h2c, f.h3
		given = slices.Clone(given)
		if !ps.h2 {
			given = slices.DeleteFunc(given, func(s string) bool { return s == "h2" })
		}
		if len(given) > 0 {
			ps.alpn = given
		}
		return ps
	}
	_, userH2 := ps.nextProto["h2"]
	switch {
	case userH2:
		// net/http leaves NextProtos to whoever installed the entry.
		ps.alpn = slices.Clone(given)
	case ps.h2:
		ps.alpn = adjustALPN(given, ps.h1, ps.h2)
	default:
		ps.alpn = slices.DeleteFunc(slices.Clone(given), func(s string) bool { return s == "h2" })
	}
	if len(ps.alpn) == 0 {
		ps.alpn = nil
	}
	return ps
}

// adjustALPN is rule 3: a copy of protos without the disabled protocols,
// with the enabled ones that are missing appended (h2 before http/1.1).
func adjustALPN(protos []string, h1, h2 bool) []string {
	out := make([]string, 0, len(protos)+2)
	haveH1, haveH2 := false, false
	for _, p := range protos {
		switch p {
		case "http/1.1":
			if !h1 {
				continue
			}
			haveH1 = true
		case "h2":
			if !h2 {
				continue
			}
			haveH2 = true
		}
		out = append(out, p)
	}
	if h2 && !haveH2 {
		out = append(out, "h2")
	}
	if h1 && !haveH1 {
		out = append(out, "http/1.1")
	}
	return out
}

// godebugHTTP2ClientOff reports whether a GODEBUG value sets
// http2client=0 (the last setting wins, as in the runtime).
func godebugHTTP2ClientOff(v string) bool {
	off := false
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && k == "http2client" {
			off = val == "0"
		}
	}
	return off
}

// isNetHTTPFunc reports whether fn was defined in package net/http: the
// TLSNextProto entries net/http installs on first use of an http.Transport
// (From copies them from a Transport that has served requests). A caller
// cannot define functions in net/http, so this never hides theirs.
func isNetHTTPFunc(fn any) bool {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return false
	}
	f := runtime.FuncForPC(v.Pointer())
	return f != nil && strings.HasPrefix(f.Name(), "net/http.")
}

// requiresHTTP1 is net/http's Request.requiresHTTP1: a WebSocket upgrade
// must not go over HTTP/2.
func requiresHTTP1(req *http.Request) bool {
	c := firstValue(req.Header, "Connection")
	if c == "" {
		return false
	}
	return httpguts.HeaderValuesContainsToken([]string{c}, "upgrade") &&
		strings.EqualFold(firstValue(req.Header, "Upgrade"), "websocket")
}

// sharedKey reports whether a request for scheme may use a shared
// (multiplexed) connection: HTTP/2 over TLS (or a caller's TLS dialer or
// TLSNextProto that may produce one), or h2c for http.
func (ps *protoSet) sharedKey(scheme string, req *http.Request) bool {
	switch scheme {
	case "https":
		if !ps.h2 && !ps.customTLSDial && ps.nextProto == nil {
			return false
		}
		return !requiresHTTP1(req)
	case "http":
		return ps.h2c
	}
	return false
}

// alpnFor returns the ALPN list for a TLS handshake on key: none for a
// request that needs HTTP/1 (rule 4), the computed list otherwise.
func (ps *protoSet) alpnFor(key connKey) []string {
	if key.h1Only && ps.h2 {
		return nil // only a request needing HTTP/1 gets an h1Only key then
	}
	return ps.alpn
}

// tlsConfigForKey is tlsConfigFor with the ALPN list of key.
func (t *Transport) tlsConfigForKey(host string, key connKey) *tls.Config {
	cfg := t.tlsConfigFor(host)
	cfg.NextProtos = t.h2.protos.alpnFor(key)
	return cfg
}

func firstValue(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}
