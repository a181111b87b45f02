package h3conn

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/idlepool"
)

// Conn is what the pool expects of an HTTP/3 connection.
var (
	_ idlepool.SharedConn   = (*Conn)(nil)
	_ idlepool.IdleReporter = (*Conn)(nil)
	_ idlepool.IdleCloser   = (*Conn)(nil)
)

// TestConnInSharedPool runs a Conn through ferry's pool: shared across
// gets, expired by the pool when idle, dropped once unusable.
func TestConnInSharedPool(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	d := newTestDialer(t, s, func(c *Config) { c.MaxConcurrentStreams = 2 })
	pool := idlepool.New[string, idlepool.Conn](idlepool.Config{})
	defer pool.Close()
	const key = "https://localhost:443"

	c := dialTest(t, d, s)
	pool.AddShared(key, c)
	got1, ok1 := pool.GetShared(key)
	got2, ok2 := pool.GetShared(key)
	if !ok1 || !ok2 || got1 != c || got2 != c {
		t.Fatalf("GetShared = %v %v, %v %v; want the conn twice", got1, ok1, got2, ok2)
	}
	if _, ok := pool.GetShared(key); ok {
		t.Fatal("GetShared beyond the stream cap")
	}
	for range 2 {
		req, _ := http.NewRequest("GET", "https://localhost/", nil)
		resp, err := got1.(*Conn).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("not idle after both requests")
	}
	pool.SetIdleTimeout(time.Nanosecond) // sweeps at once: the idle conn expires
	if c.Usable() {
		t.Fatal("the pool's idle expiry did not close the conn")
	}
	if _, ok := pool.GetShared(key); ok {
		t.Fatal("GetShared returned an expired conn")
	}
}
