package altsvc

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// fakeClock is an injectable clock that only moves when told to.
type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func newTestCache(maxOrigins int) (*Cache, *fakeClock) {
	clk := &fakeClock{now: time.Date(2026, 11, 13, 10, 0, 0, 0, time.UTC)}
	return New(Options{MaxOrigins: maxOrigins, Clock: clk.Now}), clk
}

func mustOrigin(t testing.TB, s string) Origin {
	t.Helper()
	o, err := ParseOrigin(s)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func mustUpdate(t testing.TB, c *Cache, o Origin, age time.Duration, values ...string) {
	t.Helper()
	if err := c.UpdateFromResponse(o, values, age); err != nil {
		t.Fatalf("UpdateFromResponse(%v, %q): %v", o, values, err)
	}
}

// targets renders alternatives as "proto=host:port" for comparisons.
func targets(alts []Alternative) []string {
	out := make([]string, len(alts))
	for i, a := range alts {
		out[i] = fmt.Sprintf("%s=%s", a.Protocol, joinHostPort(a.Host, int(a.Port)))
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// resident counts origins and alternatives held, expired or not, without
// reclaiming anything: what a lookup must not have touched.
func (c *Cache) resident() (origins, alts int) {
	for i := range c.shards {
		c.shards[i].each(func(e *originEntry) {
			origins++
			alts += e.view.Load().n
		})
	}
	return origins, alts
}

func TestLookupReturnsAlternativesInOrderWithMetadata(t *testing.T) {
	c, clk := newTestCache(0)
	o := mustOrigin(t, "https://Example.COM")
	mustUpdate(t, c, o, 0, `h3=":443"; ma=60, h3="alt.example.net:8443"; persist=1`)
	got := c.Lookup(mustOrigin(t, "https://example.com:443"), nil)
	if want := []string{"h3=example.com:443", "h3=alt.example.net:8443"}; !equalStrings(targets(got), want) {
		t.Fatalf("Lookup = %v, want %v", targets(got), want)
	}
	now := clk.Now()
	if !got[0].Expires().Equal(now.Add(time.Minute)) || got[0].Persist {
		t.Errorf("first: expires %v persist %v; want %v false", got[0].Expires(), got[0].Persist, now.Add(time.Minute))
	}
	if !got[1].Expires().Equal(now.Add(DefaultMaxAge)) || !got[1].Persist {
		t.Errorf("second: expires %v persist %v; want %v true", got[1].Expires(), got[1].Persist, now.Add(DefaultMaxAge))
	}
	if !got[0].BrokenUntil().IsZero() || got[0].Failures() != 0 || got[0].BrokenAt(now) {
		t.Errorf("fresh alternative reports broken state: %v %d", got[0].BrokenUntil(), got[0].Failures())
	}
	if a, ok := c.Usable(o, "h3"); !ok || a.Port != 443 {
		t.Errorf("Usable(h3) = %v, %v; want port 443", a, ok)
	}
	if _, ok := c.Usable(o, "h2"); ok {
		t.Error("Usable(h2) found an alternative that was never advertised")
	}
	if got := c.Lookup(Origin{}, nil); len(got) != 0 {
		t.Errorf("Lookup(zero Origin) = %v", got)
	}
}

func TestAgeShortensMaxAge(t *testing.T) {
	c, clk := newTestCache(0)
	o := mustOrigin(t, "https://example.com")
	mustUpdate(t, c, o, 100*time.Second, `h3=":443"; ma=160, h2=":443"; ma=100`)
	got := c.Lookup(o, nil)
	if want := []string{"h3=example.com:443"}; !equalStrings(targets(got), want) {
		t.Fatalf("Lookup = %v, want %v (ma=100 with Age 100 is stale)", targets(got), want)
	}
	if want := clk.Now().Add(time.Minute); !got[0].Expires().Equal(want) {
		t.Errorf("Expires = %v, want %v", got[0].Expires(), want)
	}
	clk.Advance(time.Minute)
	if got := c.Lookup(o, nil); len(got) != 0 {
		t.Errorf("Lookup after ma-Age elapsed = %v", targets(got))
	}
}

func TestNewHeaderReplacesAndClearRemoves(t *testing.T) {
	c, _ := newTestCache(0)
	o := mustOrigin(t, "https://example.com")
	mustUpdate(t, c, o, 0, `h3=":443", h2=":8443"`)
	mustUpdate(t, c, o, 0, `h3=":9443"`)
	if got, want := targets(c.Lookup(o, nil)), []string{"h3=example.com:9443"}; !equalStrings(got, want) {
		t.Fatalf("after replacement Lookup = %v, want %v", got, want)
	}
	mustUpdate(t, c, o, 0, "clear")
	if got := c.Lookup(o, nil); len(got) != 0 || c.Len() != 0 {
		t.Fatalf("after clear Lookup = %v, Len = %d", targets(got), c.Len())
	}
	// clear for an unknown origin is harmless.
	mustUpdate(t, c, mustOrigin(t, "https://other.example"), 0, "clear")
}

func TestMalformedInputDoesNotPoisonTheCache(t *testing.T) {
	c, _ := newTestCache(0)
	o := mustOrigin(t, "https://example.com")
	mustUpdate(t, c, o, 0, `h3=":443"`)

	// Nothing valid: the cached alternatives stay.
	err := c.UpdateFromResponse(o, []string{`h3=:443`, `garbage`}, 0)
	if countParseErrors(err) != 2 || !errors.Is(err, ErrMalformed) {
		t.Fatalf("want 2 skipped alternatives, got %v", err)
	}
	if got, want := targets(c.Lookup(o, nil)), []string{"h3=example.com:443"}; !equalStrings(got, want) {
		t.Fatalf("after malformed header Lookup = %v, want %v", got, want)
	}

	// Some valid: they replace, the bad one is reported.
	err = c.UpdateFromResponse(o, []string{`h3=":70000", h2=":8443"`}, 0)
	if countParseErrors(err) != 1 {
		t.Fatalf("want 1 skipped alternative, got %v", err)
	}
	if got, want := targets(c.Lookup(o, nil)), []string{"h2=example.com:8443"}; !equalStrings(got, want) {
		t.Fatalf("Lookup = %v, want %v", got, want)
	}
	// The same header again is not re-parsed but reports the same problem.
	if err2 := c.UpdateFromResponse(o, []string{`h3=":70000", h2=":8443"`}, 0); countParseErrors(err2) != 1 {
		t.Errorf("repeated header: want 1 skipped alternative, got %v", err2)
	}
}

func TestAlternativesPerOriginBounded(t *testing.T) {
	c, _ := newTestCache(0)
	o := mustOrigin(t, "https://example.com")
	var v string
	for i := 0; i < MaxAlternatives+3; i++ {
		v += fmt.Sprintf(`h3=":%d", `, 1000+i)
	}
	v += `h3=":1000"` // a duplicate is dropped silently
	err := c.UpdateFromResponse(o, []string{v}, 0)
	if n := countParseErrors(err); n != 3 {
		t.Errorf("want 3 reported excess alternatives, got %d (%v)", n, err)
	}
	got := c.Lookup(o, nil)
	if len(got) != MaxAlternatives || got[0].Port != 1000 || got[MaxAlternatives-1].Port != 1000+MaxAlternatives-1 {
		t.Errorf("kept %v, want the first %d", targets(got), MaxAlternatives)
	}
}

func TestNonHTTPSAndZeroOriginRejected(t *testing.T) {
	c, _ := newTestCache(0)
	if _, err := ParseOrigin("http://example.com"); !errors.Is(err, ErrNotHTTPS) {
		t.Fatalf("http origin: %v", err)
	}
	if err := c.UpdateFromResponse(Origin{}, []string{`h3=":443"`}, 0); !errors.Is(err, ErrInvalidOrigin) {
		t.Errorf("UpdateFromResponse(zero) = %v", err)
	}
	if err := c.Update(Origin{}, Header{Clear: true}, 0); !errors.Is(err, ErrInvalidOrigin) {
		t.Errorf("Update(zero) = %v", err)
	}
	if c.Len() != 0 {
		t.Errorf("Len = %d", c.Len())
	}
}

func TestLookupPrunesOnlyTheRequestedOrigin(t *testing.T) {
	c, clk := newTestCache(0)
	short1 := mustOrigin(t, "https://a.example")
	short2 := mustOrigin(t, "https://b.example")
	long := mustOrigin(t, "https://c.example")
	mustUpdate(t, c, short1, 0, `h3=":443"; ma=10, h2=":443"`)
	mustUpdate(t, c, short2, 0, `h3=":443"; ma=10`)
	mustUpdate(t, c, long, 0, `h3=":443"`)
	clk.Advance(time.Minute)

	// Lookups of the live origin and of an absent one touch nothing else.
	if got := c.Lookup(long, nil); len(got) != 1 {
		t.Fatalf("Lookup(long) = %v", targets(got))
	}
	c.Lookup(mustOrigin(t, "https://absent.example"), nil)
	if o, a := c.resident(); o != 3 || a != 4 {
		t.Fatalf("after unrelated lookups resident = %d origins %d alternatives, want 3/4 untouched", o, a)
	}
	// A lookup of short1 prunes its own expired alternative only.
	if got := c.Lookup(short1, nil); !equalStrings(targets(got), []string{"h2=a.example:443"}) {
		t.Fatalf("Lookup(short1) = %v", targets(got))
	}
	if o, a := c.resident(); o != 3 || a != 3 {
		t.Fatalf("after Lookup(short1) resident = %d/%d, want 3/3 (short2 still held)", o, a)
	}
	// Usable of short2 drops the whole origin, as it has nothing left.
	if _, ok := c.Usable(short2, "h3"); ok {
		t.Fatal("expired alternative reported usable")
	}
	if o, a := c.resident(); o != 2 || a != 2 {
		t.Fatalf("after Usable(short2) resident = %d/%d, want 2/2", o, a)
	}
}

func TestLenAndSnapshotExactAfterMisses(t *testing.T) {
	c, clk := newTestCache(0)
	for i := 0; i < 10; i++ {
		ma := 10
		if i%2 == 0 {
			ma = 1000
		}
		mustUpdate(t, c, mustOrigin(t, fmt.Sprintf("https://o%d.example", i)), 0, fmt.Sprintf(`h3=":443"; ma=%d, h2=":443"; ma=10`, ma))
	}
	clk.Advance(time.Minute)
	for i := 0; i < 50; i++ {
		c.Lookup(mustOrigin(t, fmt.Sprintf("https://miss%d.example", i)), nil)
	}
	if o, _ := c.resident(); o != 10 {
		t.Fatalf("misses reclaimed entries: resident %d origins", o)
	}
	if n := c.Len(); n != 5 {
		t.Errorf("Len = %d, want 5 live origins", n)
	}
	snap := c.Snapshot()
	if len(snap) != 5 {
		t.Fatalf("Snapshot has %d origins, want 5", len(snap))
	}
	for i, ent := range snap {
		if want := fmt.Sprintf("https://o%d.example:443", 2*i); ent.Origin.String() != want {
			t.Errorf("Snapshot[%d] = %v, want %s (sorted)", i, ent.Origin, want)
		}
		if !equalStrings(targets(ent.Alternatives), []string{"h3=" + ent.Origin.Host() + ":443"}) {
			t.Errorf("Snapshot[%d] alternatives = %v", i, targets(ent.Alternatives))
		}
	}
	if o, a := c.resident(); o != 5 || a != 5 {
		t.Errorf("after Len/Snapshot resident = %d/%d, want 5/5", o, a)
	}
}

func TestWritesReclaimEveryExpiredEntry(t *testing.T) {
	c, clk := newTestCache(0)
	for i := 0; i < 20; i++ {
		mustUpdate(t, c, mustOrigin(t, fmt.Sprintf("https://o%d.example", i)), 0, `h3=":443"; ma=10`)
	}
	clk.Advance(time.Minute)
	mustUpdate(t, c, mustOrigin(t, "https://fresh.example"), 0, `h3=":443"`)
	if o, a := c.resident(); o != 1 || a != 1 {
		t.Fatalf("after a write resident = %d/%d, want only the fresh origin", o, a)
	}
}

func TestFullCacheReclaimsExpiredBeforeEvictingLive(t *testing.T) {
	c, clk := newTestCache(3)
	live := mustOrigin(t, "https://live.example")
	mustUpdate(t, c, live, 0, `h3=":443"`)
	clk.Advance(time.Second)
	mustUpdate(t, c, mustOrigin(t, "https://old1.example"), 0, `h3=":443"; ma=10`)
	mustUpdate(t, c, mustOrigin(t, "https://old2.example"), 0, `h3=":443"; ma=10`)
	clk.Advance(time.Minute) // old1 and old2 expire; live is the least recently used
	mustUpdate(t, c, mustOrigin(t, "https://new.example"), 0, `h3=":443"`)
	if len(c.Lookup(live, nil)) != 1 {
		t.Fatal("a live origin was evicted while expired ones could be reclaimed")
	}
	if n := c.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
}

func TestFullCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c, clk := newTestCache(3)
	a, b, d := mustOrigin(t, "https://a.example"), mustOrigin(t, "https://b.example"), mustOrigin(t, "https://d.example")
	for _, o := range []Origin{a, b, d} {
		mustUpdate(t, c, o, 0, `h3=":443"`)
		clk.Advance(time.Second)
	}
	c.Lookup(a, nil) // a is now the most recently used; b the least
	clk.Advance(time.Second)
	if _, ok := c.Usable(d, "h3"); !ok {
		t.Fatal("d not usable")
	}
	clk.Advance(time.Second)
	mustUpdate(t, c, mustOrigin(t, "https://e.example"), 0, `h3=":443"`)
	if got := c.Lookup(b, nil); len(got) != 0 {
		t.Errorf("least recently used origin b survived: %v", targets(got))
	}
	for _, o := range []Origin{a, d, mustOrigin(t, "https://e.example")} {
		if len(c.Lookup(o, nil)) != 1 {
			t.Errorf("%v was evicted", o)
		}
	}
	if n := c.Len(); n != 3 {
		t.Errorf("Len = %d, want 3 (the bound)", n)
	}
	// Updating an existing origin in a full cache evicts nothing.
	mustUpdate(t, c, a, 0, `h2=":443"`)
	if n := c.Len(); n != 3 {
		t.Errorf("after updating an existing origin Len = %d, want 3", n)
	}
}

func TestDefaultCapacity(t *testing.T) {
	var c Cache // the zero Cache works
	for i := 0; i < DefaultMaxOrigins+10; i++ {
		o, err := NewOrigin("https", fmt.Sprintf("o%d.example", i), 443)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Update(o, Header{Services: []Service{{Protocol: "h3", Port: 443, MaxAge: time.Hour}}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != DefaultMaxOrigins {
		t.Errorf("Len = %d, want %d", n, DefaultMaxOrigins)
	}
}

func TestUnchangedHeaderRefreshesExpiry(t *testing.T) {
	c, clk := newTestCache(0)
	o := mustOrigin(t, "https://example.com")
	v := `h3=":443"; ma=60`
	mustUpdate(t, c, o, 0, v)
	clk.Advance(500 * time.Millisecond)
	mustUpdate(t, c, o, 0, v) // within a second: left alone
	if got := c.Lookup(o, nil); !got[0].Expires().Equal(clk.Now().Add(-500 * time.Millisecond).Add(time.Minute)) {
		t.Errorf("Expires = %v moved within the refresh step", got[0].Expires())
	}
	clk.Advance(50 * time.Second)
	mustUpdate(t, c, o, 0, v)
	if got := c.Lookup(o, nil); !got[0].Expires().Equal(clk.Now().Add(time.Minute)) {
		t.Errorf("Expires = %v, want refreshed to %v", got[0].Expires(), clk.Now().Add(time.Minute))
	}
	mustUpdate(t, c, o, 10*time.Second, v) // a different Age is a different header
	if got := c.Lookup(o, nil); !got[0].Expires().Equal(clk.Now().Add(50 * time.Second)) {
		t.Errorf("Expires = %v, want Age applied", got[0].Expires())
	}
	// After an alternative expired and was pruned the same header restores it.
	mustUpdate(t, c, o, 0, `h3=":443"; ma=60, h2=":443"; ma=5`)
	clk.Advance(10 * time.Second)
	if got := c.Lookup(o, nil); len(got) != 1 {
		t.Fatalf("Lookup = %v, want h2 pruned", targets(got))
	}
	mustUpdate(t, c, o, 0, `h3=":443"; ma=60, h2=":443"; ma=5`)
	if got := c.Lookup(o, nil); len(got) != 2 {
		t.Errorf("Lookup = %v, want both back", targets(got))
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	c := New(Options{})
	for i := 0; i < 256; i++ {
		o, _ := NewOrigin("https", fmt.Sprintf("o%d.example", i), 443)
		if err := c.Update(o, Header{Services: benchServices(MaxAlternatives)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	hit, _ := NewOrigin("https", "o7.example", 443)
	miss, _ := NewOrigin("https", "nowhere.example", 443)
	dst := make([]Alternative, 0, MaxAlternatives)
	for name, f := range map[string]func(){
		"hit":    func() { dst = c.Lookup(hit, dst[:0]) },
		"miss":   func() { dst = c.Lookup(miss, dst[:0]) },
		"usable": func() { c.Usable(hit, "h3") },
		"origin": func() { hit, _ = OriginFromHostPort("https", "o7.example:443") },
		"unchanged update": func() {
			_ = c.UpdateFromResponse(hit, []string{`h3=":443"`}, 0)
		},
	} {
		if name == "unchanged update" {
			_ = c.UpdateFromResponse(hit, []string{`h3=":443"`}, 0)
		}
		if allocs := testing.AllocsPerRun(200, f); allocs != 0 {
			t.Errorf("%s allocates %v times per call", name, allocs)
		}
	}
}

func TestAlternativeStaysSmall(t *testing.T) {
	// Lookup copies whole origins; keep the element at 56 bytes on 64-bit.
	if size := unsafe.Sizeof(Alternative{}); unsafe.Sizeof(uintptr(0)) == 8 && size != 56 {
		t.Errorf("Alternative is %d bytes, want 56", size)
	}
}

// TestEmpty: Empty is true exactly while no origin is resident: on a new
// cache, and again once the only origin was cleared or its alternatives
// expired and were reclaimed; Usable answers from the cache in between.
func TestEmpty(t *testing.T) {
	c, clk := newTestCache(0)
	o := mustOrigin(t, "https://a.example")
	if !c.Empty() {
		t.Fatal("new cache not Empty")
	}
	mustUpdate(t, c, o, 0, `h3=":443"; ma=10`)
	if c.Empty() {
		t.Fatal("Empty after an origin was added")
	}
	if _, ok := c.Usable(o, "h3"); !ok {
		t.Fatal("Usable misses the added origin")
	}
	mustUpdate(t, c, o, 0, "clear")
	if !c.Empty() {
		t.Fatal("not Empty after the only origin was cleared")
	}
	mustUpdate(t, c, o, 0, `h3=":443"; ma=10`)
	clk.Advance(time.Minute)
	if c.Empty() {
		t.Fatal("Empty before the expired origin was reclaimed")
	}
	if _, ok := c.Usable(o, "h3"); ok {
		t.Fatal("Usable returned an expired alternative")
	}
	if c.Len() != 0 || !c.Empty() {
		t.Fatal("not Empty after the expired origin was reclaimed")
	}
}
