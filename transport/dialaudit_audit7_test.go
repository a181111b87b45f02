package transport

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// TestDialAuditHostCaseKept: net/http resolves (and hooks, errors, a
// DialContext and the TLS ServerName see) the host as the URL spells it;
// ferry lower-cases it when it builds the connection key.
func TestDialAuditHostCaseKept(t *testing.T) {
	t.Skip("audit7: connkey.go originAddr lower-cases the host, so DNSStart.Host, DNS errors, DialContext's addr and SNI lose the URL's spelling (lead's file)")
	dns := dnstest.Start(t)
	resolver := dns.Resolver()
	got := map[string][]string{}
	rts := dialAuditTransports(func(std *http.Transport, f *Transport) {
		std.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver}).DialContext
		f.Resolver = resolver
	})
	for name, rt := range rts {
		var hooks dialHookLog
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // hang guard
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, hooks.trace()), "GET", "http://NX.Audit.Test/", nil)
		_, err := rt.RoundTrip(req)
		cancel()
		got[name] = append(hooks.take(), "error: "+err.Error())
	}
	if !slices.Equal(got["ferry"], got["net/http"]) {
		t.Fatalf("ferry:\n  %s\nnet/http:\n  %s", strings.Join(got["ferry"], "\n  "), strings.Join(got["net/http"], "\n  "))
	}
}
