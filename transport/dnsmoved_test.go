package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// dnsTestClock is a DNS cache clock that moves only when told to.
type dnsTestClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *dnsTestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *dnsTestClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// movedNameTransport is a ferry Transport resolving through dns with
// DNSCacheTTL 2s on clock, dialling a new connection for every request.
func movedNameTransport(dns *dnstest.Server, clock *dnsTestClock) *Transport {
	tr := New()
	tr.Proxy = nil
	tr.DisableKeepAlives = true
	tr.Resolver = dns.Resolver()
	tr.DNSCacheTTL = 2 * time.Second
	tr.dnsClock = clock.Now
	return tr
}

// getWithHooks sends a GET of url through tr and returns the DNS and
// connect hooks it fired and the status or error.
func getWithHooks(t *testing.T, tr http.RoundTripper, url string) (hooks []string, status string, err error) {
	t.Helper()
	var log dialHookLog
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // hang guard
	defer cancel()
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, log.trace()), "GET", url, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return log.take(), "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return log.take(), resp.Status, nil
}

// TestDNSMovedNameAfterTTL: a name moved from an address nothing listens
// on ([::1] at the server's port: connection refused) to the server's
// (127.0.0.1). Within the TTL the cached answer is fresh and a request
// fails at the old address with no second lookup. Past the TTL the cache
// serves the stale answer while it refreshes; every address of it
// refuses, so the dial waits for that refresh and connects to the new
// address: the first request after the TTL succeeds. Its trace shows the
// stale answer's DNSStart/DNSDone and refused connect, then DNSStart and
// DNSDone with the new answer (a lookup as net/http, which has no cache,
// would make) and the connect that succeeds. Before, that request failed
// with "connection refused" at [::1].
func TestDNSMovedNameAfterTTL(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	dns := dnstest.Start(t)
	const name = "moved.dns.test"
	dns.Set(name, "::1")
	clock := &dnsTestClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	tr := movedNameTransport(dns, clock)
	defer tr.CloseIdleConnections()
	url := "http://" + name + ":" + port + "/"

	hooks, _, err := getWithHooks(t, tr, url)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("request to the old address: %v, want connection refused", err)
	}
	dns.Set(name, "127.0.0.1")
	// Fresh answer, all addresses refused: fails as before, no lookup.
	hooks, _, err = getWithHooks(t, tr, url)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("request within the TTL: %v, want connection refused (the answer is fresh)", err)
	}
	if n := strings.Count(strings.Join(hooks, "\n"), "DNSStart"); n != 1 {
		t.Errorf("request within the TTL fired DNSStart %d times, want 1:\n  %s", n, strings.Join(hooks, "\n  "))
	}
	if q := dns.Count(name, "AAAA"); q != 1 {
		t.Errorf("%d AAAA queries before the TTL passed, want 1", q)
	}

	clock.Advance(3 * time.Second) // past the TTL, within the stale window
	hooks, status, err := getWithHooks(t, tr, url)
	if err != nil {
		t.Fatalf("first request after the TTL: %v, want the server's answer\n  %s", err, strings.Join(hooks, "\n  "))
	}
	if status != "200 OK" {
		t.Fatalf("status %q", status)
	}
	want := []string{
		"DNSStart " + name,
		"DNSDone [{::1 }] ok coalesced=false",
		"ConnectStart tcp [::1]:" + port,
		"ConnectDone tcp [::1]:" + port + " dial tcp [::1]:" + port + ": connect: connection refused",
		"DNSStart " + name,
		// The refresh may have ended before the dial failed (a cached
		// answer) or be joined: Coalesced is not pinned.
		"DNSDone [{127.0.0.1 }] ok coalesced=",
		"ConnectStart tcp 127.0.0.1:" + port,
		"ConnectDone tcp 127.0.0.1:" + port + " ok",
	}
	if len(hooks) != len(want) {
		t.Fatalf("hooks:\n  %s\nwant:\n  %s", strings.Join(hooks, "\n  "), strings.Join(want, "\n  "))
	}
	for i := range want {
		if !strings.HasPrefix(hooks[i], want[i]) {
			t.Fatalf("hook %d: %q, want %q\nall:\n  %s", i, hooks[i], want[i], strings.Join(hooks, "\n  "))
		}
	}
	// The refresh was the only lookup the stale answer cost.
	if q := dns.Count(name, "A"); q != 2 {
		t.Errorf("%d A queries, want 2 (the first lookup and the one refresh)", q)
	}
	// The new answer is fresh now: the next request dials it at once.
	hooks, _, err = getWithHooks(t, tr, url)
	if err != nil || len(hooks) != 4 {
		t.Errorf("request on the new answer: %v\n  %s", err, strings.Join(hooks, "\n  "))
	}
}

// TestDNSNameThatNowResolves: a name that did not resolve (a cached
// failure) and now does is looked up again once the failure's short TTL
// has passed (a failure is never served stale), so the first request
// after it succeeds.
func TestDNSNameThatNowResolves(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	dns := dnstest.Start(t)
	const name = "late.dns.test"
	clock := &dnsTestClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	tr := movedNameTransport(dns, clock)
	defer tr.CloseIdleConnections()
	url := "http://" + name + ":" + port + "/"
	_, _, err := getWithHooks(t, tr, url)
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("unknown name: %v, want a not-found DNS error", err)
	}
	dns.Set(name, "127.0.0.1")
	_, _, err = getWithHooks(t, tr, url)
	if !errors.As(err, &de) {
		t.Fatalf("within the negative TTL: %v, want the cached DNS error", err)
	}
	clock.Advance(1500 * time.Millisecond) // past the 1 s negative TTL
	hooks, _, err := getWithHooks(t, tr, url)
	if err != nil {
		t.Fatalf("first request after the failure expired: %v\n  %s", err, strings.Join(hooks, "\n  "))
	}
}

// TestDNSMovedNameRefreshHeldHonoursContext: when the refresh a failed
// stale answer waits for does not answer, the request's context still
// ends the wait, with the context's error; the refresh goes on and the
// next request gets the new address.
func TestDNSMovedNameRefreshHeldHonoursContext(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	dns := dnstest.Start(t)
	const name = "held.dns.test"
	dns.Set(name, "::1")
	clock := &dnsTestClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	tr := movedNameTransport(dns, clock)
	defer tr.CloseIdleConnections()
	url := "http://" + name + ":" + port + "/"
	if _, _, err := getWithHooks(t, tr, url); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("request to the old address: %v, want connection refused", err)
	}
	dns.Set(name, "127.0.0.1")
	clock.Advance(3 * time.Second)
	dns.CloseGate() // the refresh's answer is held until the test ends
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a response although the new address is not known yet")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the request ended after %v, its context after 300ms", took)
	}
	// The refresh goes on for the next request, which gets its answer.
	dns.OpenGate()
	if hooks, _, err := getWithHooks(t, tr, url); err != nil {
		t.Errorf("request once the refresh is answered: %v\n  %s", err, strings.Join(hooks, "\n  "))
	}
}
