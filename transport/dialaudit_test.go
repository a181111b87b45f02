package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"
)

// The dial audit: what a request sees of ferry's own dialing (DialContext
// nil) against net/http.Transport with its default net.Dialer, side by side
// over loopback.

// dialAuditTransports returns net/http's Transport with the default dialer
// and ferry's New(), both without a proxy and with mod applied to each.
func dialAuditTransports(mod func(std *http.Transport, f *Transport)) map[string]http.RoundTripper {
	std := &http.Transport{DialContext: (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext}
	f := New()
	f.Proxy = nil
	if mod != nil {
		mod(std, f)
	}
	return map[string]http.RoundTripper{"net/http": std, "ferry": f}
}

// silentTCPServer accepts connections and never writes, so a TLS client
// handshake on them can only end by its timeout or its context.
func silentTCPServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestDialAuditTLSHandshakeTimeout: the handshake timeout is a net.Error
// with Timeout() and net/http's text, also in TLSHandshakeDone.
func TestDialAuditTLSHandshakeTimeout(t *testing.T) {
	addr := silentTCPServer(t)
	rts := dialAuditTransports(func(std *http.Transport, f *Transport) {
		std.TLSHandshakeTimeout = 50 * time.Millisecond
		f.TLSHandshakeTimeout = 50 * time.Millisecond
	})
	got := map[string]string{}
	for name, rt := range rts {
		var doneErr error
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // hang guard
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			TLSHandshakeDone: func(_ tls.ConnectionState, err error) { doneErr = err },
		})
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/", nil)
		resp, err := rt.RoundTrip(req)
		cancel()
		if resp != nil {
			resp.Body.Close()
			t.Fatalf("%s: got a response", name)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: err = %v (%T), want a net.Error with Timeout() that is not the context's", name, err, err)
		}
		if doneErr == nil || doneErr.Error() != err.Error() {
			t.Fatalf("%s: TLSHandshakeDone err %v, RoundTrip err %v", name, doneErr, err)
		}
		got[name] = err.Error()
		closeIdle(rt)
	}
	if got["ferry"] != got["net/http"] {
		t.Fatalf("error text: ferry %q, net/http %q", got["ferry"], got["net/http"])
	}
}
