package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"
	"testing"
)

// Findings of the session-7 audit of the HTTP/3 client path that are not
// fixed: each test shows the divergence and is skipped so the package
// stays green.

// TestH3Audit7Many1xx: a server may send any number of informational
// responses before the final one (102 Processing every few seconds for a
// long operation, several 103s). net/http accepts them (bounded by
// MaxResponseHeaderBytes when no Got1xxResponse hook looks at them, not
// bounded when one does); quic-go's ClientConn fails the request after 5
// with "http3: too many 1xx informational responses", and ferry cannot
// change that loop without re-implementing ClientConn.RoundTrip on
// quic-go's RequestStream API.
func TestH3Audit7Many1xx(t *testing.T) {
	t.Skip("audit7: quic-go's http3 client fails a request after 5 informational responses; net/http accepts any number")
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			return
		}
		for range 8 {
			w.WriteHeader(http.StatusProcessing)
		}
		io.WriteString(w, "done")
	}), nil)
	for _, hook := range []bool{false, true} {
		t.Run(fmt.Sprint("hook_", hook), func(t *testing.T) {
			tw.both(t, func(t *testing.T, rt http.RoundTripper, u string) string {
				n := 0
				ctx := context.Background()
				if hook {
					ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
						Got1xxResponse: func(int, textproto.MIMEHeader) error { n++; return nil },
					})
				}
				req, err := http.NewRequestWithContext(ctx, "GET", u+"/slow", nil)
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("%s; hook saw %d", describe(rt.RoundTrip(req)), n)
			})
		})
	}
}

// TestH3Audit7MaxConnsPerHost: MaxConnsPerHost bounds the connections to a
// host in net/http (dialing, in use and idle). ferry applies it to TCP and
// to HTTP/3 separately: the request that learns Alt-Svc leaves its TCP
// connection idle and the background QUIC dial adds a second connection,
// so MaxConnsPerHost 1 gives 2 (and a request finding the QUIC connection
// full dials TCP up to the limit again). Fixing it needs one count across
// both pools (getconn.go and the h3 pool).
func TestH3Audit7MaxConnsPerHost(t *testing.T) {
	t.Skip("audit7: MaxConnsPerHost is applied to TCP and HTTP/3 separately: 1 allows a TCP and a QUIC connection at once")
	var tcpConns atomic.Int32
	h := &protoHandler{}
	s := httptest.NewUnstartedServer(h)
	s.TLS = h3Cert(t).ServerConfig()
	s.Config.ErrorLog = nilLogger()
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			tcpConns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	port, _ := startH3(t, h, nil)
	h.setAltSvc(altValue("", port))
	tr := newH3Transport(t, func(tr *Transport) { tr.MaxConnsPerHost = 1 })
	fetch(t, tr, "GET", s.URL, nil)
	eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, s.URL) })
	quicConns, _ := h3State(tr)
	if n := int(tcpConns.Load()) + quicConns; n > 1 {
		t.Fatalf("%d TCP and %d QUIC connections open to the host with MaxConnsPerHost 1", tcpConns.Load(), quicConns)
	}
}
