package transport

import (
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestOriginAddrCache: the cache returns what originAddr computes, keeps
// the scheme's default port apart, survives hosts that share a slot, does
// not cache errors, and does not allocate on a hit.
func TestOriginAddrCache(t *testing.T) {
	var c originAddrCache
	check := func(raw string) {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := originAddr(u)
		for i := 0; i < 2; i++ { // the second lookup is served by the cache
			got, err := c.addr(u)
			if got != want || (err == nil) != (wantErr == nil) {
				t.Fatalf("%s lookup %d: %q, %v; originAddr gives %q, %v", raw, i, got, err, want, wantErr)
			}
		}
	}
	for _, raw := range []string{
		"http://Example.COM/", "https://example.com/", "http://example.com/",
		"https://example.com:8443/", "http://[::1]/", "https://[FE80::1%25en0]/",
		"http://bücher.example/", "https://xn--bcher-kva.example/",
	} {
		check(raw)
	}

	// A host whose IDN conversion fails is an error every time.
	bad := &url.URL{Scheme: "http", Host: "a\u200d\u200d.example"}
	for i := 0; i < 2; i++ {
		if _, err := c.addr(bad); err == nil {
			t.Fatalf("lookup %d of an invalid IDN host succeeded", i)
		}
	}

	// Two hosts sharing a slot evict each other and still resolve right.
	first := "h0.example"
	second := ""
	for i := 1; second == ""; i++ {
		if h := fmt.Sprintf("h%d.example", i); originAddrSlot(h) == originAddrSlot(first) {
			second = h
		}
	}
	for i := 0; i < 3; i++ {
		check("https://" + first + "/")
		check("https://" + second + "/")
	}

	// A miss (the two colliding hosts taking turns) costs what originAddr
	// costs plus the entry and its copy of the host.
	u1, _ := url.Parse("https://" + first + "/")
	u2, _ := url.Parse("https://" + second + "/")
	build := testing.AllocsPerRun(100, func() { originAddr(u1) })
	if got := testing.AllocsPerRun(100, func() { c.addr(u1); c.addr(u2) }) / 2; got != build+2 {
		t.Fatalf("a miss made %v allocations; building the address alone makes %v", got, build)
	}

	u, _ := url.Parse("https://api.example.com/v1")
	if got := testing.AllocsPerRun(100, func() {
		if a, _ := c.addr(u); a != "api.example.com:443" {
			t.Fatalf("addr %q", a)
		}
	}); got != 0 {
		t.Fatalf("a cached lookup made %v allocations", got)
	}
}

// TestOriginAddrCacheKeepsOnlyTheHost: a cached entry does not keep the
// URL string it was parsed from alive (u.Host is a slice of it).
func TestOriginAddrCacheKeepsOnlyTheHost(t *testing.T) {
	var c originAddrCache
	var freed atomic.Bool
	func() {
		raw := "https://long.example/?q=" + strings.Repeat("q", 1<<20)
		runtime.AddCleanup(unsafe.StringData(raw), func(f *atomic.Bool) { f.Store(true) }, &freed)
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if a, err := c.addr(u); a != "long.example:443" || err != nil {
			t.Fatalf("addr %q, %v", a, err)
		}
	}()
	for i := 0; i < 50 && !freed.Load(); i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if !freed.Load() {
		t.Fatal("the cache keeps the whole URL string alive")
	}
	if e := c.slots[originAddrSlot("long.example")].Load(); e == nil || e.addr != "long.example:443" {
		t.Fatal("the entry is gone from the cache") // and with it what it kept
	}
}
