package transport

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"reflect"
	"slices"
	"sync"
	"testing"
)

// TestDialTLSUnhandshakenConn: a DialTLSContext that returns a *tls.Conn
// whose handshake has not run yet gets it run by the transport, with the
// TLS trace hooks around it, as net/http does; a handshake that fails
// (certificate not trusted) ends with TLSHandshakeDone carrying the error
// and the request failing.
func TestDialTLSUnhandshakenConn(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	trusted := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	trusted.NextProtos = []string{"http/1.1"}
	trusted.ServerName = "example.com" // httptest certificates name example.com
	for _, impl := range []string{"nethttp", "ferry"} {
		for _, good := range []bool{true, false} {
			name := impl + "/trusted"
			if !good {
				name = impl + "/untrusted"
			}
			t.Run(name, func(t *testing.T) {
				cfg := trusted
				if !good {
					cfg = &tls.Config{ServerName: "example.com", NextProtos: []string{"http/1.1"}}
				}
				dialTLS := func(ctx context.Context, network, addr string) (net.Conn, error) {
					raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return tls.Client(raw, cfg), nil // not handshaken
				}
				var rt http.RoundTripper = &http.Transport{DialTLSContext: dialTLS}
				if impl == "ferry" {
					rt = &Transport{DialTLSContext: dialTLS}
				}
				defer closeIdle(rt)
				var hooks tlsHooks
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), hooks.trace()), "GET", srv.URL, nil)
				resp, err := rt.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				events, doneErr, incomplete := hooks.result()
				if incomplete {
					t.Error("TLSHandshakeDone without error reports an incomplete handshake")
				}
				if !reflect.DeepEqual(events, []string{"start", "done"}) {
					t.Fatalf("TLS hooks %v, want [start done]", events)
				}
				if good && (err != nil || doneErr != nil) {
					t.Fatalf("trusted: RoundTrip error %v, handshake error %v", err, doneErr)
				}
				if !good && (err == nil || doneErr == nil) {
					t.Fatalf("untrusted: RoundTrip error %v, handshake error %v; want both", err, doneErr)
				}
			})
		}
	}
}

// tlsHooks records the TLS handshake hooks of a request: their order, the
// error of the last TLSHandshakeDone, and whether one without an error
// reported an incomplete handshake.
type tlsHooks struct {
	mu         sync.Mutex // guards the fields below
	events     []string   // "start" and "done"
	doneErr    error
	incomplete bool
}

func (h *tlsHooks) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		TLSHandshakeStart: func() {
			h.mu.Lock()
			h.events = append(h.events, "start")
			h.mu.Unlock()
		},
		TLSHandshakeDone: func(st tls.ConnectionState, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, "done")
			h.doneErr = err
			if err == nil && !st.HandshakeComplete {
				h.incomplete = true
			}
		},
	}
}

// result returns what was recorded so far.
func (h *tlsHooks) result() (events []string, doneErr error, incomplete bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events), h.doneErr, h.incomplete
}
