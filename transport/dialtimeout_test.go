package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// TestDialTimeoutCoversLookup: the dial timeout bounds the name lookup too,
// as net.Dialer.Timeout does, so a DNS server that never answers ends the
// request after the dial timeout with a timeout error ("lookup ...: i/o
// timeout"), not after the DNS cache's own, longer, lookup bound.
func TestDialTimeoutCoversLookup(t *testing.T) {
	dns := dnstest.Start(t)
	dns.Set("slow.test", "127.0.0.1")
	dns.CloseGate()
	tr := &Transport{Resolver: dns.Resolver()}
	defer tr.CloseIdleConnections()
	tr.init()
	tr.dialer.Timeout = 100 * time.Millisecond
	errGuard := errors.New("hang guard: the dial timeout did not end the lookup")
	ctx, cancel := context.WithTimeoutCause(t.Context(), 3*time.Second, errGuard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://slow.test:1/", nil)
	_, err := tr.RoundTrip(req)
	dns.AnsweredAll(t) // the abandoned lookup ends (no goroutine left for goleak)
	var ne net.Error
	if err == nil || errors.Is(err, errGuard) || !errors.As(err, &ne) || !ne.Timeout() || !strings.Contains(err.Error(), "lookup slow.test") {
		t.Fatalf("err = %v, want the lookup's timeout", err)
	}
}
