package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/sockopt"
)

// TestDialSocketOptionsOverHTTP2: WithSocketOptions promises the
// options reach "the connection that serves" the request. An invalid value
// fails the request before a connection is taken, over HTTP/1.1 and HTTP/2
// alike (HTTP/2 once ignored the options; sockopts_h2_test.go
// covers HTTP/3 and the options being applied over HTTP/2).
func TestDialSocketOptionsOverHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	for _, h2 := range []bool{false, true} {
		f := New()
		f.Proxy = nil
		f.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		if !h2 {
			f.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		ctx, cancel := context.WithTimeout(WithSocketOptions(t.Context(), TOS(300)), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := f.RoundTrip(req)
		cancel()
		if resp != nil {
			resp.Body.Close()
		}
		f.CloseIdleConnections()
		if err == nil {
			t.Errorf("HTTP/2 %v: TOS(300) served (%s) without applying the options", h2, resp.Proto)
		} else if !errors.Is(err, sockopt.ErrInvalidValue) {
			t.Errorf("HTTP/2 %v: err %v, want sockopt.ErrInvalidValue", h2, err)
		}
	}
}

// TestDialPortOutOfRange: a URL port above 65535 fails as net.Dialer
// fails it ("dial tcp: address 65536: invalid port", a *net.AddrError).
func TestDialPortOutOfRange(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:65536/", "http://localhost:99999999999999999999/"} {
		got := map[string]string{}
		for name, rt := range dialTransports(nil) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // hang guard
			req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
			_, err := rt.RoundTrip(req)
			cancel()
			var ae *net.AddrError
			if err == nil || !errors.As(err, &ae) {
				t.Errorf("%s %s: err %v, want a *net.AddrError", name, u, err)
			}
			got[name] = fmt.Sprint(err)
		}
		if got["ferry"] != got["net/http"] {
			t.Errorf("%s: ferry %q, net/http %q", u, got["ferry"], got["net/http"])
		}
	}
}
