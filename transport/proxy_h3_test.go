package transport

import (
	"net/http"
	"testing"
)

// TestProxyNoHTTP3: a request through a proxy never goes over
// HTTP/3 (net/http has none; a UDP flow would bypass the proxy), whether
// the origin's Alt-Svc arrives through the proxy (it is recorded, coming
// over TLS from the origin, for requests that go direct) or was known
// before, and no QUIC dialer is opened.
func TestProxyNoHTTP3(t *testing.T) {
	u := startWrapped(t, &protoHandler{})
	for _, known := range []bool{false, true} {
		p := startTestProxy(t, nil, "")
		tr := newH3Transport(t, func(tr *Transport) { tr.Proxy = http.ProxyURL(p.url("", "")) })
		if known {
			advertise(t, tr.altSvcCache(), u, altValue("", originOf(t, u).Port()))
		}
		for i := 0; i < 3; i++ {
			if resp, _ := fetch(t, tr, "GET", u, nil); !isTCPProto(resp.Proto) {
				t.Fatalf("known=%v, request %d: proto %s through the proxy, want TCP", known, i, resp.Proto)
			}
		}
		tr.CloseIdleConnections()
		if s := p.seen(); len(s.Lines) != 1 || s.Lines[0][:8] != "CONNECT " {
			t.Fatalf("known=%v: the proxy saw %q, want one CONNECT", known, s.Lines)
		}
		if _, ok := tr.altSvcCache().Usable(originOf(t, u), "h3"); !ok {
			t.Fatalf("known=%v: the origin's h3 alternative is not in the cache, so the test shows nothing", known)
		}
		if _, open := h3State(tr); open {
			t.Fatalf("known=%v: a QUIC dialer was opened", known)
		}
	}
}
