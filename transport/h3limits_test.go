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

// Limits on the HTTP/3 client path: informational responses and
// MaxConnsPerHost. A test that shows a known divergence is skipped with
// the reason, so the package stays green.

// TestH3Many1xx: a server may send any number of informational
// responses before the final one (102 Processing every few seconds for a
// long operation, several 103s). net/http accepts them (bounded by
// MaxResponseHeaderBytes when no Got1xxResponse hook looks at them, not
// bounded when one does); quic-go's ClientConn fails the request after 5
// with "http3: too many 1xx informational responses", and ferry cannot
// change that loop without re-implementing ClientConn.RoundTrip on
// quic-go's RequestStream API.
func TestH3Many1xx(t *testing.T) {
	t.Skip("test: quic-go's http3 client fails a request after 5 informational responses; net/http accepts any number")
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

// TestH3MaxConnsPerHost: MaxConnsPerHost bounds the connections to a
// host in net/http (dialing, in use and idle). Applied to TCP and to
// HTTP/3 separately, a limit of 1 would leave a TCP and a QUIC connection
// open at once; a QUIC dial and connection hold a slot of the origin's TCP
// key (maxconns.go), and the TestMaxConns* tests cover the move under
// load. This is the simplest case: once the origin is on HTTP/3 with a limit of 1, the TCP connection
// that learnt the Alt-Svc is closed, so open TCP plus QUIC is at most 1.
func TestH3MaxConnsPerHost(t *testing.T) {
	var tcpOpen atomic.Int32
	h := &protoHandler{}
	s := httptest.NewUnstartedServer(h)
	s.TLS = h3Cert(t).ServerConfig()
	s.Config.ErrorLog = nilLogger()
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			tcpOpen.Add(1)
		case http.StateClosed, http.StateHijacked:
			tcpOpen.Add(-1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	port, _ := startH3(t, h, nil)
	h.setAltSvc(altValue("", port))
	tr := newH3Transport(t, func(tr *Transport) { tr.MaxConnsPerHost = 1 })
	if p, err := getProto(context.Background(), tr, s.URL); err != nil || !isTCPProto(p) {
		t.Fatalf("first request: %s, %v; want TCP", p, err)
	}
	awaitHTTP3(t, tr, s.URL)
	// The server sees the TCP close a moment after the client closed it.
	eventually(t, "the TCP connection closed at the server", func() bool { return tcpOpen.Load() == 0 })
	quicConns, _ := h3State(tr)
	if n := int(tcpOpen.Load()) + quicConns; n != 1 {
		t.Fatalf("%d TCP and %d QUIC connections open to the host with MaxConnsPerHost 1, want 1 in all", tcpOpen.Load(), quicConns)
	}
}
