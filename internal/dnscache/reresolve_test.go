package dnscache

import (
	"net/http/httptrace"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// TestLookupStaleReported: LookupNetIPStale reports a stale answer (past
// its TTL, served while a refresh runs) as stale, a fresh one as not.
func TestLookupStaleReported(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("age.ferry.test", "127.0.0.1")
	clock := newFakeClock()
	c := newTestCache(t, srv, clock, nil)
	for _, tc := range []struct {
		advance time.Duration
		stale   bool
	}{{0, false}, {ttl / 2, false}, {ttl, true}} {
		clock.Advance(tc.advance)
		_, stale, err := c.LookupNetIPStale(t.Context(), "age.ferry.test")
		if err != nil || stale != tc.stale {
			t.Fatalf("after %v more: stale %v, %v; want stale %v", tc.advance, stale, err, tc.stale)
		}
	}
}

// TestReresolveJoinsRefresh: Reresolve after a stale answer waits for the
// refresh that answer started (no query of its own) and returns the new
// addresses, firing DNSStart and a coalesced DNSDone.
func TestReresolveJoinsRefresh(t *testing.T) {
	srv, clock, c := cachedName(t, "moving.ferry.test")
	srv.Set("moving.ferry.test", "127.0.0.2")
	clock.Advance(ttl + time.Second)
	srv.CloseGate()
	got, stale, err := c.LookupNetIPStale(t.Context(), "moving.ferry.test")
	if err != nil || !stale || !sameAddrs(got, addrs("127.0.0.1")) {
		t.Fatalf("stale lookup: %v stale=%v %v", got, stale, err)
	}
	srv.AwaitQueries(t, "moving.ferry.test", "A", 2) // the refresh's, held
	var starts, coalesced atomic.Int32
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { starts.Add(1) },
		DNSDone: func(i httptrace.DNSDoneInfo) {
			if i.Coalesced {
				coalesced.Add(1)
			}
		},
	})
	joined := make(chan struct{})
	c.testHookJoined = func(string) { close(joined) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, err := c.Reresolve(ctx, "moving.ferry.test")
		if err != nil || !sameAddrs(a, addrs("127.0.0.2")) {
			t.Errorf("Reresolve: %v, %v; want 127.0.0.2", a, err)
		}
	}()
	<-joined
	srv.OpenGate()
	<-done
	c.refreshes.Wait()
	if n := srv.Count("moving.ferry.test", "A"); n != 2 {
		t.Errorf("A queries = %d, want 2 (first lookup, one refresh that Reresolve joined)", n)
	}
	if starts.Load() != 1 || coalesced.Load() != 1 {
		t.Errorf("DNSStart %d, coalesced DNSDone %d; want 1 and 1", starts.Load(), coalesced.Load())
	}
}

// TestReresolveAfterRefresh: once the refresh replaced the stale answer,
// Reresolve returns the fresh entry without a query.
func TestReresolveAfterRefresh(t *testing.T) {
	srv, clock, c := cachedName(t, "moved.ferry.test")
	srv.Set("moved.ferry.test", "127.0.0.2")
	clock.Advance(ttl + time.Second)
	if _, stale, err := c.LookupNetIPStale(t.Context(), "moved.ferry.test"); err != nil || !stale {
		t.Fatalf("stale lookup: stale=%v %v", stale, err)
	}
	c.refreshes.Wait()
	before := srv.TotalQueries()
	a, err := c.Reresolve(t.Context(), "moved.ferry.test")
	if err != nil || !sameAddrs(a, addrs("127.0.0.2")) {
		t.Fatalf("Reresolve: %v, %v; want 127.0.0.2", a, err)
	}
	if srv.TotalQueries() != before {
		t.Errorf("Reresolve of a refreshed name made %d queries", srv.TotalQueries()-before)
	}
}

// TestReresolveFailedLookupKeepsStale: a stale answer whose refresh failed
// (held off for NegativeTTL) is looked up once more by Reresolve; when
// that fails too, the stale answer is returned and still served, not
// replaced by the failure.
func TestReresolveFailedLookupKeepsStale(t *testing.T) {
	srv, clock, c := cachedName(t, "gone.ferry.test")
	srv.Remove("gone.ferry.test")
	clock.Advance(ttl + time.Second)
	if _, stale, err := c.LookupNetIPStale(t.Context(), "gone.ferry.test"); err != nil || !stale {
		t.Fatalf("stale lookup: stale=%v %v", stale, err)
	}
	c.refreshes.Wait() // failed: the stale answer is kept
	before := srv.Count("gone.ferry.test", "A")
	a, err := c.Reresolve(t.Context(), "gone.ferry.test")
	if err != nil || !sameAddrs(a, addrs("127.0.0.1")) {
		t.Fatalf("Reresolve: %v, %v; want the stale 127.0.0.1", a, err)
	}
	if n := srv.Count("gone.ferry.test", "A") - before; n != 1 {
		t.Errorf("Reresolve made %d A queries, want 1", n)
	}
	a, stale, err := c.LookupNetIPStale(t.Context(), "gone.ferry.test")
	if err != nil || !stale || !sameAddrs(a, addrs("127.0.0.1")) {
		t.Fatalf("after the failed Reresolve: %v stale=%v %v; want the stale answer", a, stale, err)
	}
}
