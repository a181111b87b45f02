package dnscache

import (
	"context"
	"errors"
	"net"
	"net/http/httptrace"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

const ttl = 30 * time.Second

// cachedName starts a DNS server answering name with 127.0.0.1 and a
// cache on a fake clock, and looks name up once, so that the cache holds a
// fresh answer for it.
func cachedName(t *testing.T, name string) (*dnstest.Server, *fakeClock, *Cache) {
	t.Helper()
	srv := dnstest.Start(t)
	srv.Set(name, "127.0.0.1")
	clock := newFakeClock()
	c := newTestCache(t, srv, clock, nil)
	if _, err := c.LookupNetIP(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	return srv, clock, c
}

func newTestCache(t *testing.T, srv *dnstest.Server, clock *fakeClock, mod func(*Config)) *Cache {
	t.Helper()
	cfg := Config{Resolver: srv.Resolver(), TTL: ttl, NegativeTTL: time.Second, Clock: clock.Now}
	if mod != nil {
		mod(&cfg)
	}
	c := New(cfg)
	t.Cleanup(c.refreshes.Wait)
	return c
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func sameAddrs(a, b []netip.Addr) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, netip.Addr.Compare)
	slices.SortFunc(b, netip.Addr.Compare)
	return slices.Equal(a, b)
}

func TestLookupWithinTTLMakesNoQuery(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("alpha.ferry.test", "127.0.0.1", "::1")
	clock := newFakeClock()
	c := newTestCache(t, srv, clock, nil)

	for i := range 5 {
		got, err := c.LookupNetIP(t.Context(), "alpha.ferry.test")
		if err != nil {
			t.Fatal(err)
		}
		if !sameAddrs(got, addrs("127.0.0.1", "::1")) {
			t.Fatalf("lookup %d = %v", i, got)
		}
		clock.Advance(ttl / 10)
	}
	// Names are case-insensitive: same entry.
	if _, err := c.LookupNetIP(t.Context(), "ALPHA.Ferry.test"); err != nil {
		t.Fatal(err)
	}
	if a, aaaa := srv.Count("alpha.ferry.test", "A"), srv.Count("alpha.ferry.test", "AAAA"); a != 1 || aaaa != 1 {
		t.Fatalf("queries A=%d AAAA=%d within TTL, want 1 and 1", a, aaaa)
	}
	st := c.Stats()
	if st.Misses != 1 || st.Hits != 5 || st.Entries != 1 {
		t.Fatalf("stats %+v, want 1 miss, 5 hits, 1 entry", st)
	}
}

func TestLookupIPLiteralNoQueryNoHooks(t *testing.T) {
	srv := dnstest.Start(t)
	c := newTestCache(t, srv, newFakeClock(), nil)
	hooks := 0
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { hooks++ },
		DNSDone:  func(httptrace.DNSDoneInfo) { hooks++ },
	})
	for _, tt := range []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"::1", "::1"},
		{"::ffff:127.0.0.1", "127.0.0.1"},
		{"fe80::1%lo", "fe80::1%lo"},
	} {
		got, err := c.LookupNetIP(ctx, tt.in)
		if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr(tt.want) {
			t.Fatalf("LookupNetIP(%q) = %v, %v; want [%s]", tt.in, got, err, tt.want)
		}
	}
	if hooks != 0 || srv.TotalQueries() != 0 {
		t.Fatalf("IP literals fired %d hooks and made %d queries", hooks, srv.TotalQueries())
	}
}

func TestConcurrentLookupsShareOneQuery(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("busy.ferry.test", "127.0.0.1", "::1")
	const callers = 100
	var joined atomic.Int32
	allJoined := make(chan struct{})
	c := newTestCache(t, srv, newFakeClock(), nil)
	c.testHookJoined = func(string) {
		if joined.Add(1) == callers {
			close(allJoined)
		}
	}
	srv.CloseGate()
	var coalescedHooks atomic.Int32
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		DNSDone: func(info httptrace.DNSDoneInfo) {
			if info.Coalesced {
				coalescedHooks.Add(1)
			}
		},
	})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.LookupNetIP(ctx, "busy.ferry.test")
			if err == nil && len(got) != 2 {
				err = errors.New("wrong answer")
			}
			errs <- err
		}()
	}
	<-allJoined
	srv.OpenGate()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if a, aaaa := srv.Count("busy.ferry.test", "A"), srv.Count("busy.ferry.test", "AAAA"); a != 1 || aaaa != 1 {
		t.Fatalf("%d concurrent lookups made A=%d AAAA=%d queries, want 1 each", callers, a, aaaa)
	}
	st := c.Stats()
	if st.Misses != 1 || st.Coalesced != callers-1 {
		t.Fatalf("stats %+v, want 1 miss and %d coalesced", st, callers-1)
	}
	if n := coalescedHooks.Load(); n != callers {
		t.Fatalf("DNSDone.Coalesced true for %d callers, want all %d (shared answer)", n, callers)
	}
}

func TestStaleServedWhileOneRefreshRuns(t *testing.T) {
	srv, clock, c := cachedName(t, "moving.ferry.test")
	srv.Set("moving.ferry.test", "127.0.0.2")
	clock.Advance(ttl + time.Second) // expired, within MaxStale (= TTL)
	srv.CloseGate()
	for range 10 {
		got, err := c.LookupNetIP(t.Context(), "moving.ferry.test")
		if err != nil {
			t.Fatal(err)
		}
		if !sameAddrs(got, addrs("127.0.0.1")) {
			t.Fatalf("while refreshing got %v, want the stale 127.0.0.1", got)
		}
	}
	srv.OpenGate()
	c.refreshes.Wait()
	if n := srv.Count("moving.ferry.test", "A"); n != 2 {
		t.Fatalf("A queries = %d, want 2 (first lookup + one refresh)", n)
	}
	st := c.Stats()
	if st.Refreshes != 1 || st.StaleServed != 10 {
		t.Fatalf("stats %+v, want 1 refresh and 10 stale answers", st)
	}
	got, err := c.LookupNetIP(t.Context(), "moving.ferry.test")
	if err != nil || !sameAddrs(got, addrs("127.0.0.2")) {
		t.Fatalf("after refresh got %v, %v; want 127.0.0.2", got, err)
	}
	if n := srv.Count("moving.ferry.test", "A"); n != 2 {
		t.Fatalf("refreshed answer cost a query: A queries = %d", n)
	}
}

func TestStaleBeyondMaxStaleIsAMiss(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("old.ferry.test", "127.0.0.1")
	clock := newFakeClock()
	c := newTestCache(t, srv, clock, func(cfg *Config) { cfg.MaxStale = 5 * time.Second })
	if _, err := c.LookupNetIP(t.Context(), "old.ferry.test"); err != nil {
		t.Fatal(err)
	}
	srv.Set("old.ferry.test", "127.0.0.3")
	clock.Advance(ttl + 6*time.Second)
	got, err := c.LookupNetIP(t.Context(), "old.ferry.test")
	if err != nil || !sameAddrs(got, addrs("127.0.0.3")) {
		t.Fatalf("got %v, %v; want a fresh 127.0.0.3", got, err)
	}
	if st := c.Stats(); st.StaleServed != 0 || st.Misses != 2 {
		t.Fatalf("stats %+v, want 2 misses and no stale answers", st)
	}
}

func TestFailedRefreshKeepsStaleAnswer(t *testing.T) {
	srv, clock, c := cachedName(t, "flaky.ferry.test")
	srv.Remove("flaky.ferry.test")
	clock.Advance(ttl + time.Second)
	if got, err := c.LookupNetIP(t.Context(), "flaky.ferry.test"); err != nil || !sameAddrs(got, addrs("127.0.0.1")) {
		t.Fatalf("got %v, %v", got, err)
	}
	c.refreshes.Wait()
	before := srv.TotalQueries()
	// Within NegativeTTL of the failed refresh: stale answer, no new refresh.
	if got, err := c.LookupNetIP(t.Context(), "flaky.ferry.test"); err != nil || !sameAddrs(got, addrs("127.0.0.1")) {
		t.Fatalf("got %v, %v", got, err)
	}
	c.refreshes.Wait()
	if srv.TotalQueries() != before {
		t.Fatalf("refresh retried within NegativeTTL: %d new queries", srv.TotalQueries()-before)
	}
	if st := c.Stats(); st.Refreshes != 1 || st.RefreshErrors != 1 {
		t.Fatalf("stats %+v, want 1 failed refresh", st)
	}
}

func TestFailureNamesHostAndIsCachedBriefly(t *testing.T) {
	tests := []struct {
		name       string
		serverDown bool
		notFound   bool
	}{
		{name: "nxdomain", notFound: true},
		{name: "server down", serverDown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := dnstest.Start(t)
			clock := newFakeClock()
			cfg := func(cfg *Config) {}
			if tt.serverDown {
				// A loopback UDP port with nobody listening: ICMP refused.
				pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				dead := pc.LocalAddr().String()
				pc.Close()
				cfg = func(cfg *Config) { cfg.Resolver = dnstest.ResolverFor(dead) }
			}
			c := newTestCache(t, srv, clock, cfg)
			const host = "missing.ferry.test"
			_, err := c.LookupNetIP(t.Context(), host)
			if err == nil {
				t.Fatal("lookup of a missing name succeeded")
			}
			var de *net.DNSError
			if !errors.As(err, &de) || de.Name != host || !strings.Contains(err.Error(), host) {
				t.Fatalf("error %v (%T) does not name %s", err, err, host)
			}
			if de.IsNotFound != tt.notFound {
				t.Fatalf("IsNotFound = %v, want %v", de.IsNotFound, tt.notFound)
			}
			if !tt.serverDown && srv.Count(host, "A") == 0 {
				t.Fatal("the server never saw the query")
			}
			before := srv.TotalQueries()
			clock.Advance(500 * time.Millisecond)
			_, err2 := c.LookupNetIP(t.Context(), host)
			if err2 == nil || srv.TotalQueries() != before {
				t.Fatalf("second lookup within NegativeTTL: err %v, %d new queries", err2, srv.TotalQueries()-before)
			}
			if !errors.As(err2, &de) || de.Name != host {
				t.Fatalf("cached error %v lost its identity", err2)
			}
			if tt.serverDown {
				return
			}
			clock.Advance(time.Second)
			srv.Set(host, "127.0.0.9")
			got, err := c.LookupNetIP(t.Context(), host)
			if err != nil || !sameAddrs(got, addrs("127.0.0.9")) {
				t.Fatalf("after NegativeTTL got %v, %v", got, err)
			}
		})
	}
}

func TestCallerCancelDoesNotCancelSharedLookup(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("shared.ferry.test", "127.0.0.1")
	c := newTestCache(t, srv, newFakeClock(), nil)
	joined := make(chan struct{}, 2)
	c.testHookJoined = func(string) { joined <- struct{}{} }
	srv.CloseGate()

	ctx, cancel := context.WithCancel(t.Context())
	cancelled := make(chan error, 1)
	go func() {
		_, err := c.LookupNetIP(ctx, "shared.ferry.test")
		cancelled <- err
	}()
	patient := make(chan error, 1)
	go func() {
		got, err := c.LookupNetIP(t.Context(), "shared.ferry.test")
		if err == nil && !sameAddrs(got, addrs("127.0.0.1")) {
			err = errors.New("wrong answer")
		}
		patient <- err
	}()
	<-joined
	<-joined
	cancel()
	err := <-cancelled
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v, want context.Canceled", err)
	}
	var de *net.DNSError
	if !errors.As(err, &de) || de.Name != "shared.ferry.test" {
		t.Fatalf("cancelled caller error %v does not name the host", err)
	}
	srv.OpenGate()
	if err := <-patient; err != nil {
		t.Fatalf("other caller failed: %v", err)
	}
	// Already-cancelled context: no lookup at all.
	before := srv.TotalQueries()
	if _, err := c.LookupNetIP(ctx, "other.ferry.test"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if srv.TotalQueries() != before {
		t.Fatal("a cancelled context still made a query")
	}
}

func TestNoCachingWhenTTLNegative(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("nocache.ferry.test", "127.0.0.1")
	c := newTestCache(t, srv, newFakeClock(), func(cfg *Config) { cfg.TTL = -1 })
	for range 2 {
		if _, err := c.LookupNetIP(t.Context(), "nocache.ferry.test"); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Count("nocache.ferry.test", "A"); n != 2 {
		t.Fatalf("A queries = %d, want 2 with caching off", n)
	}
	if st := c.Stats(); st.Entries != 0 {
		t.Fatalf("entries = %d with caching off", st.Entries)
	}
}

func TestEntriesBounded(t *testing.T) {
	srv := dnstest.Start(t)
	names := []string{"a.ferry.test", "b.ferry.test", "c.ferry.test", "d.ferry.test", "e.ferry.test"}
	for _, n := range names {
		srv.Set(n, "127.0.0.1")
	}
	clock := newFakeClock()
	c := newTestCache(t, srv, clock, func(cfg *Config) { cfg.MaxEntries = 3 })
	for _, n := range names {
		if _, err := c.LookupNetIP(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	st := c.Stats()
	if st.Entries != 3 || st.Evictions != 2 {
		t.Fatalf("stats %+v, want 3 entries and 2 evictions", st)
	}
	// The oldest names went first.
	before := srv.TotalQueries()
	if _, err := c.LookupNetIP(t.Context(), "e.ferry.test"); err != nil {
		t.Fatal(err)
	}
	if srv.TotalQueries() != before {
		t.Fatal("newest entry was evicted")
	}
	// Expired entries are reclaimed before a live one is evicted.
	clock.Advance(10 * ttl)
	srv.Set("f.ferry.test", "127.0.0.1")
	if _, err := c.LookupNetIP(t.Context(), "f.ferry.test"); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Entries != 1 {
		t.Fatalf("entries = %d, want 1 after reclaiming expired ones", st.Entries)
	}
}

func TestTraceHooks(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("traced.ferry.test", "127.0.0.1", "::1")
	c := newTestCache(t, srv, newFakeClock(), nil)
	var events []string
	var done []httptrace.DNSDoneInfo
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		DNSStart: func(info httptrace.DNSStartInfo) { events = append(events, "start "+info.Host) },
		DNSDone: func(info httptrace.DNSDoneInfo) {
			events = append(events, "done")
			done = append(done, info)
		},
	})
	for range 2 { // a miss, then a hit
		if _, err := c.LookupNetIP(ctx, "traced.ferry.test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.LookupNetIP(ctx, "nothere.ferry.test"); err == nil {
		t.Fatal("missing name resolved")
	}
	want := []string{"start traced.ferry.test", "done", "start traced.ferry.test", "done", "start nothere.ferry.test", "done"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	for i, d := range done[:2] {
		var got []netip.Addr
		for _, a := range d.Addrs {
			ip, _ := netip.AddrFromSlice(a.IP)
			got = append(got, ip.Unmap())
		}
		if d.Err != nil || d.Coalesced || !sameAddrs(got, addrs("127.0.0.1", "::1")) {
			t.Fatalf("DNSDone %d = %+v", i, d)
		}
	}
	if done[2].Err == nil || len(done[2].Addrs) != 0 {
		t.Fatalf("DNSDone for a failure = %+v", done[2])
	}
}

func TestEmptyHost(t *testing.T) {
	srv := dnstest.Start(t)
	c := newTestCache(t, srv, newFakeClock(), nil)
	_, err := c.LookupNetIP(t.Context(), "")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("empty host: %v", err)
	}
	if srv.TotalQueries() != 0 {
		t.Fatal("empty host made a query")
	}
}

func TestDefaults(t *testing.T) {
	c := New(Config{})
	if c.resolver != net.DefaultResolver || c.ttl != DefaultTTL || c.negativeTTL != DefaultNegativeTTL ||
		c.maxEntries != DefaultMaxEntries || c.maxStale != DefaultTTL || c.lookupTimeout != DefaultLookupTimeout {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestParseIPLiteral(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means not a literal
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"::1", "::1"},
		{"::ffff:10.0.0.1", "10.0.0.1"},
		{"fe80::1%eth0", "fe80::1%eth0"},
		{"example.com", ""},
		{"db1", ""},
		{"1.2.3", ""},
		{"1.2.3.4.5", ""},
		{"", ""},
		{"[::1]", ""},
		{"256.1.1.1", ""},
	}
	for _, tt := range tests {
		got, ok := ParseIPLiteral(tt.in)
		if ok != (tt.want != "") || (ok && got != netip.MustParseAddr(tt.want)) {
			t.Errorf("ParseIPLiteral(%q) = %v, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
}
