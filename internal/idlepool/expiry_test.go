package idlepool

import (
	"context"
	"testing"
	"time"
)

const testTimeout = 10 * time.Second

func newExpiring(clk *fakeClock, timeout time.Duration) *Pool[string, *testConn] {
	return New[string, *testConn](Config{IdleTimeout: timeout, MaxIdlePerKey: 10, Clock: clk.Now})
}

func wm(p *Pool[string, *testConn], key string) int64 {
	return p.shardFor(key).watermark.Load()
}

func timerAt(t *testing.T, p *Pool[string, *testConn]) (int64, bool) {
	t.Helper()
	return p.expiry.deadline()
}

func TestExpiryOnRequestPath(t *testing.T) {
	clk := newClock()
	p := newExpiring(clk, testTimeout)
	defer p.Close()
	old, fresh := dial(t, p, "a", 1), dial(t, p, "a", 2)
	p.Put("a", old)
	clk.Advance(5 * time.Second)
	p.Put("a", fresh)
	clk.Advance(5 * time.Second) // old has sat idle exactly IdleTimeout
	got, idleFor, ok := p.TryGet("a")
	if !ok || got != fresh || idleFor != 5*time.Second {
		t.Fatalf("TryGet = %v %v %v, want the fresh conn idle 5s", got, idleFor, ok)
	}
	p.closers.Wait()
	if !old.isClosed() {
		t.Fatal("expired conn not closed")
	}
	if p.IdleLen("a") != 0 || p.ConnsLen("a") != 1 {
		t.Fatalf("IdleLen %d ConnsLen %d, want 0 and 1 (the fresh conn is in use)", p.IdleLen("a"), p.ConnsLen("a"))
	}
	if st := p.Stats(); st.Expirations != 1 {
		t.Fatalf("Expirations = %d, want 1", st.Expirations)
	}
}

func TestExpiredConnNeverReturned(t *testing.T) {
	clk := newClock()
	p := newExpiring(clk, testTimeout)
	defer p.Close()
	c := putNew(t, p, "a")[0]
	clk.Advance(testTimeout)
	got, _, reused, err := p.Acquire(context.Background(), "a")
	if err != nil || reused {
		t.Fatalf("Acquire = %v reused=%v err=%v, want a miss", got, reused, err)
	}
	p.closers.Wait()
	if !c.isClosed() {
		t.Fatal("expired conn not closed")
	}
	// The expired conn's slot went, the new dial holds one.
	if n := p.ConnsLen("a"); n != 1 {
		t.Fatalf("ConnsLen = %d, want 1", n)
	}
}

func TestTimerClosesForQuietClient(t *testing.T) {
	clk := newClock()
	p := newExpiring(clk, testTimeout)
	defer p.Close()
	if _, armed := timerAt(t, p); armed {
		t.Fatal("timer armed with nothing idle")
	}
	a := putNew(t, p, "a")[0]
	at, armed := timerAt(t, p)
	if !armed || at != int64(testTimeout) {
		t.Fatalf("timer at %v armed=%v, want %v", time.Duration(at), armed, testTimeout)
	}
	clk.Advance(3 * time.Second)
	b := putNew(t, p, "b")[0]
	if at2, _ := timerAt(t, p); at2 != at {
		t.Fatalf("a later put moved the timer to %v", time.Duration(at2))
	}
	clk.Advance(7 * time.Second)
	p.fire() // what the timer runs
	if !a.isClosed() || b.isClosed() {
		t.Fatalf("after first fire: a closed=%v b closed=%v, want true false", a.isClosed(), b.isClosed())
	}
	if at, armed = timerAt(t, p); !armed || at != int64(13*time.Second) {
		t.Fatalf("timer re-armed at %v armed=%v, want 13s", time.Duration(at), armed)
	}
	clk.Advance(3 * time.Second)
	p.fire()
	if !b.isClosed() {
		t.Fatal("b not closed by the second fire")
	}
	if _, armed = timerAt(t, p); armed {
		t.Fatal("timer still armed with nothing idle")
	}
	if st := p.Stats(); st.Expirations != 2 || st.Idle != 0 {
		t.Fatalf("Stats = %+v", st)
	}
	if p.ConnsLen("a")+p.ConnsLen("b") != 0 {
		t.Fatal("expired conns kept their slots")
	}
}

// TestRealTimerFires runs the real time.AfterFunc path end to end; it waits
// for the close event, it asserts nothing about how long it took.
func TestRealTimerFires(t *testing.T) {
	p := New[string, *testConn](Config{IdleTimeout: 5 * time.Millisecond})
	defer p.Close()
	c := putNew(t, p, "a")[0]
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatal("idle conn never closed by the pool timer")
	}
	if st := p.Stats(); st.Expirations != 1 {
		t.Fatalf("Expirations = %d, want 1", st.Expirations)
	}
}

func TestWatermarkPut(t *testing.T) {
	clk := newClock()
	p := newExpiring(clk, testTimeout)
	defer p.Close()
	keys := keysByShard(p, 2, true)
	other := keysByShard(p, 64, false)
	if wm(p, keys[0]) != noIdle {
		t.Fatal("empty shard has a watermark")
	}
	clk.Advance(time.Second)
	putNew(t, p, keys[0])
	if got := wm(p, keys[0]); got != int64(time.Second) {
		t.Fatalf("watermark after first put = %v, want 1s", time.Duration(got))
	}
	clk.Advance(time.Second)
	putNew(t, p, keys[1])
	if got := wm(p, keys[0]); got != int64(time.Second) {
		t.Fatalf("a newer put moved the watermark to %v", time.Duration(got))
	}
	// A put into another, empty shard sets that shard's own watermark.
	for _, k := range other {
		if p.shardFor(k) != p.shardFor(keys[0]) {
			putNew(t, p, k)
			if got := wm(p, k); got != int64(2*time.Second) {
				t.Fatalf("other shard watermark = %v, want 2s", time.Duration(got))
			}
			break
		}
	}
}

func TestWatermarkGetThenSweepTightens(t *testing.T) {
	clk := newClock()
	p := newExpiring(clk, testTimeout)
	defer p.Close()
	keys := keysByShard(p, 2, true)
	putNew(t, p, keys[0]) // t=0
	clk.Advance(time.Second)
	second := putNew(t, p, keys[1])[0] // t=1s
	if _, _, ok := p.TryGet(keys[0]); !ok {
		t.Fatal("TryGet missed")
	}
	if got := wm(p, keys[0]); got != 0 {
		t.Fatalf("get changed the watermark to %v; it stays a lower bound", time.Duration(got))
	}
	// Until the (stale) watermark is due, get and put run no sweep.
	sweeps := p.Stats().Sweeps
	for range 100 {
		clk.Advance(50 * time.Millisecond)
		putNew(t, p, keys[0])
		p.TryGet(keys[0])
	}
	if got := p.Stats().Sweeps; got != sweeps {
		t.Fatalf("%d sweeps before the watermark was due", got-sweeps)
	}
	clk.Advance(4 * time.Second) // t=10s: watermark 0 is due, keys[1] (t=1s) is not expired
	if _, _, ok := p.TryGet(keys[0]); ok {
		t.Fatal("keys[0] unexpectedly idle")
	}
	if p.Stats().Sweeps == sweeps {
		t.Fatal("no sweep once the watermark was due")
	}
	if second.isClosed() {
		t.Fatal("sweep closed a conn idle for less than the timeout")
	}
	if got := wm(p, keys[0]); got != int64(time.Second) {
		t.Fatalf("sweep set watermark %v, want exactly 1s", time.Duration(got))
	}
}

func TestWatermarkEvict(t *testing.T) {
	clk := newClock()
	p := New[string, *testConn](Config{IdleTimeout: testTimeout, MaxIdle: 2, Clock: clk.Now})
	defer p.Close()
	keys := keysByShard(p, 3, true)
	for _, k := range keys {
		putNew(t, p, k)
		clk.Advance(time.Second)
	}
	p.closers.Wait()
	if got := wm(p, keys[0]); got != int64(time.Second) {
		t.Fatalf("watermark after evicting the t=0 conn = %v, want 1s", time.Duration(got))
	}
}

func TestWatermarkCloseIdle(t *testing.T) {
	clk := newClock()
	p := newExpiring(clk, testTimeout)
	defer p.Close()
	cs := putNew(t, p, "a", "b", "c")
	p.CloseIdle()
	for _, c := range cs {
		if !c.isClosed() {
			t.Fatalf("conn %d not closed by CloseIdle", c.id)
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		if wm(p, k) != noIdle || p.ConnsLen(k) != 0 {
			t.Fatalf("key %s: watermark %d ConnsLen %d after CloseIdle", k, wm(p, k), p.ConnsLen(k))
		}
	}
	p.fire()
	if _, armed := timerAt(t, p); armed {
		t.Fatal("timer re-armed with nothing idle")
	}
}

func TestShorterTimeoutMovesDeadlines(t *testing.T) {
	clk := newClock()
	p := newExpiring(clk, time.Minute)
	defer p.Close()
	a := putNew(t, p, "a")[0] // t=0
	clk.Advance(15 * time.Second)
	b := putNew(t, p, "b")[0] // t=15s
	clk.Advance(5 * time.Second)
	if at, _ := timerAt(t, p); at != int64(time.Minute) {
		t.Fatalf("timer at %v, want 1m", time.Duration(at))
	}
	p.SetIdleTimeout(10 * time.Second) // t=20s: a (idle 20s) is past it, b (5s) is not
	p.closers.Wait()
	if !a.isClosed() || b.isClosed() {
		t.Fatalf("a closed=%v b closed=%v, want true false", a.isClosed(), b.isClosed())
	}
	if at, armed := timerAt(t, p); !armed || at != int64(25*time.Second) {
		t.Fatalf("timer at %v armed=%v, want 25s (b's new deadline)", time.Duration(at), armed)
	}
	if p.IdleTimeout() != 10*time.Second {
		t.Fatalf("IdleTimeout = %v", p.IdleTimeout())
	}
	// Turning expiry off stops the timer; nothing expires any more.
	p.SetIdleTimeout(0)
	if _, armed := timerAt(t, p); armed {
		t.Fatal("timer armed with expiry off")
	}
	clk.Advance(time.Hour)
	if _, _, ok := p.TryGet("b"); !ok {
		t.Fatal("b expired with IdleTimeout 0")
	}
}
