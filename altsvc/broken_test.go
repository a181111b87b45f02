package altsvc

import (
	"testing"
	"time"
)

func TestBackoffSchedule(t *testing.T) {
	want := []time.Duration{
		0,
		5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, 80 * time.Minute,
		160 * time.Minute, 320 * time.Minute, 640 * time.Minute, 1280 * time.Minute, 2560 * time.Minute,
		48 * time.Hour, 48 * time.Hour,
	}
	for n, w := range want {
		if got := Backoff(n); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, w)
		}
	}
	if got := Backoff(1 << 30); got != 48*time.Hour {
		t.Errorf("Backoff(huge) = %v", got)
	}
}

func TestMarkBrokenHidesThenBacksOffAndMarkWorkingResets(t *testing.T) {
	c, clk := newTestCache(0)
	o := mustOrigin(t, "https://example.com")
	mustUpdate(t, c, o, 0, `h3=":443"; ma=1000000, h3="alt.example.com:8443"; ma=1000000`)
	first, ok := c.Usable(o, "h3")
	if !ok || first.Port != 443 {
		t.Fatalf("Usable = %v, %v", first, ok)
	}

	for n := 1; n <= 12; n++ {
		until, ok := c.MarkBroken(o, first)
		if !ok {
			t.Fatalf("failure %d: MarkBroken found nothing", n)
		}
		if want := clk.Now().Add(Backoff(n)); !until.Equal(want) {
			t.Fatalf("failure %d: broken until %v, want %v", n, until, want)
		}
		// While broken, Usable falls back to the next h3 alternative, and
		// Lookup still lists the broken one with its metadata.
		if a, ok := c.Usable(o, "h3"); !ok || a.Host != "alt.example.com" {
			t.Fatalf("failure %d: Usable = %v, %v; want the other alternative", n, a, ok)
		}
		got := c.Lookup(o, nil)
		if len(got) != 2 || got[0].Failures() != n || !got[0].BrokenUntil().Equal(until) || !got[0].BrokenAt(clk.Now()) {
			t.Fatalf("failure %d: Lookup = %+v", n, got)
		}
		clk.Advance(Backoff(n) - time.Second)
		if a, _ := c.Usable(o, "h3"); a.Port == 443 {
			t.Fatalf("failure %d: usable again before the backoff ended", n)
		}
		clk.Advance(time.Second)
		if a, _ := c.Usable(o, "h3"); a.Port != 443 {
			t.Fatalf("failure %d: not usable after the backoff ended", n)
		}
	}
	if !c.MarkWorking(o, first) {
		t.Fatal("MarkWorking found nothing")
	}
	got := c.Lookup(o, nil)
	if got[0].Failures() != 0 || !got[0].BrokenUntil().IsZero() {
		t.Fatalf("after MarkWorking: failures %d broken until %v", got[0].Failures(), got[0].BrokenUntil())
	}
	if until, _ := c.MarkBroken(o, first); !until.Equal(clk.Now().Add(5 * time.Minute)) {
		t.Errorf("after reset the backoff restarts at 5m; got until %v", until)
	}
}

func TestMarkUnknownAlternative(t *testing.T) {
	c, _ := newTestCache(0)
	o := mustOrigin(t, "https://example.com")
	if _, ok := c.MarkBroken(o, Alternative{Protocol: "h3", Host: "example.com", Port: 443}); ok {
		t.Error("MarkBroken on an empty cache succeeded")
	}
	mustUpdate(t, c, o, 0, `h3=":443"`)
	if _, ok := c.MarkBroken(o, Alternative{Protocol: "h3", Host: "example.com", Port: 444}); ok {
		t.Error("MarkBroken of another port succeeded")
	}
	if c.MarkWorking(o, Alternative{Protocol: "h2", Host: "example.com", Port: 443}) {
		t.Error("MarkWorking of another protocol succeeded")
	}
}

func TestBrokenMarkSurvivesHeaderUpdate(t *testing.T) {
	c, clk := newTestCache(0)
	o := mustOrigin(t, "https://example.com")
	mustUpdate(t, c, o, 0, `h3=":443"`)
	a, _ := c.Usable(o, "h3")
	c.MarkBroken(o, a)
	until, _ := c.MarkBroken(o, a) // two failures: 10 minutes
	clk.Advance(time.Minute)

	mustUpdate(t, c, o, 0, `h3=":443"; ma=7200, h2=":443"`) // a new header keeping h3=":443"
	got := c.Lookup(o, nil)
	if len(got) != 2 || got[0].Failures() != 2 || !got[0].BrokenUntil().Equal(until) {
		t.Fatalf("after update: %+v; want the broken mark kept (until %v)", got, until)
	}
	if _, ok := c.Usable(o, "h3"); ok {
		t.Fatal("broken alternative usable after a header update")
	}
	// The same header again (the no-parse path) keeps it too.
	mustUpdate(t, c, o, 0, `h3=":443"; ma=7200, h2=":443"`)
	if _, ok := c.Usable(o, "h3"); ok {
		t.Fatal("broken alternative usable after an unchanged header")
	}
	// A header that drops the alternative drops its mark with it.
	mustUpdate(t, c, o, 0, `h2=":443"`)
	mustUpdate(t, c, o, 0, `h3=":443"`)
	if _, ok := c.Usable(o, "h3"); !ok {
		t.Error("mark of a withdrawn alternative was kept")
	}
}

func TestNetworkChangedKeepsOnlyPersistAndForgetsBrokenMarks(t *testing.T) {
	c, _ := newTestCache(0)
	a := mustOrigin(t, "https://a.example")
	b := mustOrigin(t, "https://b.example")
	mustUpdate(t, c, a, 0, `h3=":443"; persist=1, h2=":443"`)
	mustUpdate(t, c, b, 0, `h3=":443"`)
	alt, _ := c.Usable(a, "h3")
	c.MarkBroken(a, alt)

	c.NetworkChanged()

	got := c.Lookup(a, nil)
	if !equalStrings(targets(got), []string{"h3=a.example:443"}) {
		t.Fatalf("after NetworkChanged Lookup(a) = %v, want only the persist alternative", targets(got))
	}
	if got[0].Failures() != 0 || !got[0].BrokenUntil().IsZero() {
		t.Errorf("broken mark survived the network change: %+v", got[0])
	}
	if _, ok := c.Usable(a, "h3"); !ok {
		t.Error("persist alternative not usable after the network change")
	}
	if got := c.Lookup(b, nil); len(got) != 0 {
		t.Errorf("non-persist origin kept: %v", targets(got))
	}
	if n := c.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
	// The cache keeps working after the sweep.
	mustUpdate(t, c, b, 0, `h3=":443"`)
	if c.Len() != 2 {
		t.Errorf("Len = %d after re-adding, want 2", c.Len())
	}
}
