package altsvc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	src, clk := newTestCache(0)
	a := mustOrigin(t, "https://a.example")
	v6 := mustOrigin(t, "https://[::1]:8443")
	mustUpdate(t, src, a, 0, `h3=":443"; ma=3600; persist=1, h3="alt.example:8443", w%20x="[2001:db8::1]:9000"; ma=60`)
	mustUpdate(t, src, v6, 0, `h3=":8443"`)

	var buf bytes.Buffer
	if err := src.Save(&buf); err != nil {
		t.Fatal(err)
	}
	dst := New(Options{Clock: clk.Now})
	st, err := dst.Load(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if st != (LoadStats{Loaded: 4}) {
		t.Errorf("LoadStats = %+v, want 4 loaded\n%s", st, buf.String())
	}
	want, got := src.Snapshot(), dst.Snapshot()
	if len(want) != len(got) {
		t.Fatalf("round trip: %d origins, want %d\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if want[i].Origin != got[i].Origin {
			t.Errorf("origin %d = %v, want %v", i, got[i].Origin, want[i].Origin)
		}
		if !equalStrings(targets(want[i].Alternatives), targets(got[i].Alternatives)) {
			t.Errorf("%v alternatives = %v, want %v", got[i].Origin, targets(got[i].Alternatives), targets(want[i].Alternatives))
		}
		for j := range want[i].Alternatives {
			w, g := want[i].Alternatives[j], got[i].Alternatives[j]
			if !w.Expires().Equal(g.Expires()) || w.Persist != g.Persist {
				t.Errorf("%v %s: expires %v persist %v, want %v %v", got[i].Origin, g.Protocol, g.Expires(), g.Persist, w.Expires(), w.Persist)
			}
		}
	}
	// Loaded entries behave like header-learned ones: they expire.
	clk.Advance(2 * time.Minute)
	if got := dst.Lookup(a, nil); len(got) != 2 {
		t.Errorf("after 2 minutes Lookup = %v, want the ma=60 one gone", targets(got))
	}
}

func TestLoadSkipsExpiredAndMalformedLines(t *testing.T) {
	c, _ := newTestCache(0) // now is 2026-11-13T10:00:00Z
	in := strings.Join([]string{
		"# a comment",
		"",
		"https://a.example:443 h3 a.example 443 2026-11-14T00:00:00Z 0",
		"https://a.example:443 h2 a.example 443 2026-11-14T00:00:00Z 1",
		"https://a.example:443 h2 a.example 443 2026-11-14T00:00:00Z 1", // duplicate
		"https://b.example:443 h3 b.example 443 2026-11-12T00:00:00Z 0", // expired
		"https://b.example:443 h3 b.example 443 2026-11-13T10:00:00Z 0", // expires now
		"http://c.example:80 h3 c.example 443 2026-11-14T00:00:00Z 0",   // not https
		"https://c.example:443 h3 c.example 0 2026-11-14T00:00:00Z 0",   // bad port
		"https://c.example:443 h3 c.example 443 tomorrow 0",             // bad time
		"https://c.example:443 h3 c.example 443 2026-11-14T00:00:00Z 2", // bad persist
		"https://c.example:443 h3 c.example 443 2026-11-14T00:00:00Z",   // too few fields
		"https://c.example:443 h%zz c.example 443 2026-11-14T00:00:00Z 0",
		"https://c.example:443 h3 c..example 443 2026-11-14T00:00:00Z 0",
		"https://c.example:443 h3 c.example 443 9999-11-14T00:00:00Z 0", // out of range
		"https://d.example:443 h3 d.example 443 2026-11-14T00:00:00Z 0" + strings.Repeat(" ", 2000),
		strings.Repeat("x", 5000),
		"https://e.example:443 h3 e.example 443 2026-11-14T00:00:00Z 1", // last line, no newline
	}, "\n")
	st, err := c.Load(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := LoadStats{Loaded: 3, Expired: 2, Malformed: 11}
	if st != want || st.Skipped() != 13 {
		t.Errorf("LoadStats = %+v (skipped %d), want %+v", st, st.Skipped(), want)
	}
	if got := targets(c.Lookup(mustOrigin(t, "https://a.example"), nil)); !equalStrings(got, []string{"h3=a.example:443", "h2=a.example:443"}) {
		t.Errorf("a.example = %v", got)
	}
	if c.Len() != 2 {
		t.Errorf("Len = %d, want 2", c.Len())
	}
}

func TestLoadCountsExcessAlternatives(t *testing.T) {
	c, _ := newTestCache(0)
	var b strings.Builder
	for i := 0; i < MaxAlternatives+2; i++ {
		fmt.Fprintf(&b, "https://a.example:443 h3 a.example %d 2026-11-14T00:00:00Z 0\n", 1000+i)
	}
	st, err := c.Load(strings.NewReader(b.String()))
	if err != nil || st != (LoadStats{Loaded: MaxAlternatives, Excess: 2}) {
		t.Errorf("Load = %+v, %v", st, err)
	}
}

type failingReader struct{ data io.Reader }

var errDisk = errors.New("disk on fire")

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.data.Read(p)
	if err == io.EOF {
		return n, errDisk
	}
	return n, err
}

func TestLoadIsAllOrNothingOnReadError(t *testing.T) {
	c, _ := newTestCache(0)
	r := failingReader{strings.NewReader("https://a.example:443 h3 a.example 443 2026-11-14T00:00:00Z 0\n")}
	if _, err := c.Load(r); !errors.Is(err, errDisk) {
		t.Fatalf("Load error = %v, want it to wrap the read error", err)
	}
	if c.Len() != 0 {
		t.Errorf("a failed Load stored %d origins", c.Len())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errDisk }

func TestSaveReportsWriteError(t *testing.T) {
	c, _ := newTestCache(0)
	mustUpdate(t, c, mustOrigin(t, "https://a.example"), 0, `h3=":443"`)
	if err := c.Save(failingWriter{}); !errors.Is(err, errDisk) {
		t.Errorf("Save error = %v, want it to wrap the write error", err)
	}
}
