package transport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// TestHostCaseSharesPool pins a documented difference from net/http: host
// names are lower-cased for the pool, so spellings that differ only in case
// share one connection (net/http dials one per spelling), and the name
// resolved (DNSStart) is the lower-cased one.
func TestHostCaseSharesPool(t *testing.T) {
	dns := dnstest.Start(t)
	dns.Set("mixed.test", "127.0.0.1")
	srv := startHandlerServer(t, hello, false, nil)
	port := srv.URL[len("http://127.0.0.1:"):]
	tr := &Transport{Resolver: dns.Resolver()}
	defer tr.CloseIdleConnections()
	var mu sync.Mutex
	var lookedUp []string
	trace := &httptrace.ClientTrace{DNSStart: func(i httptrace.DNSStartInfo) {
		mu.Lock()
		lookedUp = append(lookedUp, i.Host)
		mu.Unlock()
	}}
	for _, host := range []string{"Mixed.TEST", "mixed.test", "MIXED.test"} {
		ctx := httptrace.WithClientTrace(context.Background(), trace)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+host+":"+port+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := srv.connCount(); n != 1 {
		t.Fatalf("%d connections for three spellings of one host, want 1", n)
	}
	if len(lookedUp) != 1 || lookedUp[0] != "mixed.test" {
		t.Fatalf("DNSStart hosts %q, want one lookup of \"mixed.test\"", lookedUp)
	}
}
