//go:build linux

package dialer

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache"
	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// movingClock is a DNS cache clock moved by the test.
type movingClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *movingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *movingClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestDialStaleAnswerMoved: a name moves from [::1] (nothing listens on
// the port: refused) to 127.0.0.1. A fresh answer that refuses fails Dial
// with no second lookup; past the TTL the stale answer refuses too, and
// Dial connects to the new address the refresh found instead of failing.
func TestDialStaleAnswerMoved(t *testing.T) {
	s4 := listen(t, "127.0.0.1:0")
	dns := dnstest.Start(t)
	dns.Set("moved.dialer.test", "::1")
	clock := &movingClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	cache := dnscache.New(dnscache.Config{Resolver: dns.Resolver(), TTL: 2 * time.Second, Clock: clock.Now})
	d := &Dialer{DNS: cache}
	hostport := fmt.Sprintf("moved.dialer.test:%d", s4.port)
	if _, err := d.Dial(t.Context(), hostport); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("first dial: %v, want connection refused", err)
	}
	dns.Set("moved.dialer.test", "127.0.0.1")
	if _, err := d.Dial(t.Context(), hostport); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial within the TTL: %v, want connection refused", err)
	}
	if n := dns.Count("moved.dialer.test", "A"); n != 1 {
		t.Fatalf("%d A queries within the TTL, want 1", n)
	}
	clock.Advance(3 * time.Second)
	c, err := d.Dial(t.Context(), hostport)
	if err != nil {
		t.Fatalf("first dial after the TTL: %v", err)
	}
	defer c.Close()
	if c.Remote.Addr() != v4 {
		t.Fatalf("connected to %v", c.Remote)
	}
	if n := dns.Count("moved.dialer.test", "A"); n != 2 {
		t.Errorf("%d A queries, want 2 (first lookup, one refresh)", n)
	}
}
