package transport

import (
	"crypto/tls"
	"net/http"
	"testing"
)

// TestH3FollowsExplicitHTTP2OptOut: a caller who turned HTTP/2 off
// explicitly (Protocols without HTTP2, an empty TLSNextProto map, GODEBUG
// http2client=0) gets HTTP/1.1 only, even from an origin whose HTTP/3
// alternative is already known; HTTP/2 left off by net/http's implicit rule
// (a TLSClientConfig without ForceAttemptHTTP2) keeps HTTP/3, and so do
// Protocols allowing HTTP/2 and a TLSNextProto copied from a used
// http.Transport (net/http's own "h2" entry).
func TestH3FollowsExplicitHTTP2OptOut(t *testing.T) {
	usedStd := &http.Transport{ForceAttemptHTTP2: true}
	usedStd.CloseIdleConnections() // sets up its HTTP/2 support: TLSNextProto["h2"]
	if usedStd.TLSNextProto["h2"] == nil {
		t.Fatal("net/http did not install its h2 entry; the row below tests nothing")
	}
	for _, tc := range []struct {
		name    string
		godebug string
		mod     func(*Transport)
		h3      bool
	}{
		{name: "protocols_http1_only", mod: func(tr *Transport) {
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetHTTP1(true)
		}},
		{name: "tlsnextproto_empty", mod: func(tr *Transport) {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}},
		{name: "godebug_http2client_0", godebug: "http2client=0"},
		{name: "protocols_http1_http2", h3: true, mod: func(tr *Transport) {
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetHTTP1(true)
			tr.Protocols.SetHTTP2(true)
		}},
		{name: "tlsnextproto_from_std", h3: true, mod: func(tr *Transport) { tr.TLSNextProto = usedStd.TLSNextProto }},
		{name: "tls_config_without_force", h3: true}, // newH3Transport sets TLSClientConfig
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.godebug != "" {
				t.Setenv("GODEBUG", tc.godebug)
			}
			h := &protoHandler{}
			port, _ := startH3(t, h, nil)
			h.setAltSvc(altValue("", port))
			u := startTLS(t, h)
			tr := newH3Transport(t, tc.mod)
			tr.init()
			if got := tr.h3Enabled(); got != tc.h3 {
				t.Fatalf("h3Enabled() = %v, want %v", got, tc.h3)
			}
			advertise(t, tr.altSvcCache(), u, altValue("", port))
			if tc.h3 {
				eventually(t, "a request over HTTP/3", func() bool {
					resp, _ := fetch(t, tr, "GET", u, nil)
					return resp.Proto == "HTTP/3.0"
				})
				return
			}
			for i := range 3 {
				if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != "HTTP/1.1" {
					t.Fatalf("request %d went over %s", i, resp.Proto)
				}
			}
			if h3Ready(t, tr, u) {
				t.Fatal("an HTTP/3 connection was made")
			}
			// The Alt-Svc of each answer starts no QUIC dial in the
			// background either (the flight's Dialer would exist now).
			if _, dialer := h3State(tr); dialer {
				t.Fatal("a QUIC dial was started")
			}
		})
	}
}
