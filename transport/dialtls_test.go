package transport

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"reflect"
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
				var mu sync.Mutex // guards events
				var events []string
				var doneErr error
				trace := &httptrace.ClientTrace{
					TLSHandshakeStart: func() { mu.Lock(); events = append(events, "start"); mu.Unlock() },
					TLSHandshakeDone: func(st tls.ConnectionState, err error) {
						mu.Lock()
						defer mu.Unlock()
						events = append(events, "done")
						doneErr = err
						if err == nil && !st.HandshakeComplete {
							t.Error("TLSHandshakeDone without error reports an incomplete handshake")
						}
					},
				}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", srv.URL, nil)
				resp, err := rt.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				mu.Lock()
				defer mu.Unlock()
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
