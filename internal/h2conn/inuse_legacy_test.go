//go:build !(go1.27 && !http2legacy)

package h2conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// Test binaries carry no dependency list (cmd/go records none), so the
// real gate (builtXnet) says xnetUnknown here, and single-use and
// strict-limit connections would not be marked. The tests run as a program
// built with go.mod's x/net does; TestPinnedXnetIsChecked ties that x/net
// to the checked line, and TestMarkInUseGate tries every answer.
func init() { builtXnet = func() xnetBuilt { return xnetChecked } }

// TestCheckedXnet: only a release on the checked line counts, also when
// x/net is replaced by such a release of itself; a newer line, a
// pseudo-version or pre-release, a fork, a local directory or an absent
// x/net do not.
func TestCheckedXnet(t *testing.T) {
	xnet := func(v string, replace *debug.Module) []*debug.Module {
		return []*debug.Module{
			{Path: "golang.org/x/sys", Version: "v0.50.0"},
			{Path: "golang.org/x/net", Version: v, Replace: replace},
		}
	}
	for _, tc := range []struct {
		name string
		deps []*debug.Module
		want bool // xnetChecked, else xnetUnchecked
	}{
		{"pinned", xnet("v0.62.0", nil), true},
		{"patch_release", xnet("v0.62.3", nil), true},
		{"newer_line", xnet("v0.63.0", nil), false},
		{"older_line", xnet("v0.61.0", nil), false},
		{"longer_minor", xnet("v0.620.0", nil), false},
		{"line_only", xnet("v0.62.", nil), false},
		{"pseudo_version", xnet("v0.62.1-0.20260301000000-0123456789ab", nil), false},
		{"pre_release", xnet("v0.62.1-rc.1", nil), false},
		{"replaced_by_release", xnet("v0.63.0", &debug.Module{Path: "golang.org/x/net", Version: "v0.62.1"}), true},
		{"replaced_by_newer", xnet("v0.62.0", &debug.Module{Path: "golang.org/x/net", Version: "v0.63.0"}), false},
		{"replaced_by_fork", xnet("v0.62.0", &debug.Module{Path: "example.com/net", Version: "v0.62.0"}), false},
		{"replaced_by_directory", xnet("v0.62.0", &debug.Module{Path: "../net"}), false},
		{"absent", []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.50.0"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := xnetUnchecked
			if tc.want {
				want = xnetChecked
			}
			if got := classifyXnet(tc.deps); got != want {
				t.Fatalf("classifyXnet = %v, want %v", got, want)
			}
		})
	}
}

// TestPinnedXnetIsChecked: the x/net that go.mod requires is on the
// checked line, so the tests (which open the gate) run what a build with
// the pin runs. Moving go.mod to another x/net fails here until the
// three facts in inuse_legacy.go were read again in it.
func TestPinnedXnetIsChecked(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var version string
	for _, line := range strings.Split(string(mod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "require" {
			f = f[1:]
		}
		if len(f) >= 2 && f[0] == "golang.org/x/net" {
			version = f[1]
		}
		if len(f) >= 1 && (f[0] == "replace" || f[0] == "golang.org/x/net") && strings.Contains(line, "=>") {
			t.Fatalf("go.mod replaces x/net: %q", line)
		}
	}
	if !checkedXnetVersion(version) {
		t.Fatalf("go.mod requires x/net %q, not on the checked line %s*", version, checkedXnetLine)
	}
}

// TestMarkInUseGate: NewClientConn hands a connection to x/net's pool
// path, for the marker, always with a checked x/net, never with an
// unchecked one, and with an unknown one (a binary without a dependency
// list, such as a test binary) only when it is kept-alive without a strict
// limit, the kind whose fallback is harmless.
func TestMarkInUseGate(t *testing.T) {
	xnetOnly(t)
	for _, built := range []struct {
		name string
		x    xnetBuilt
	}{{"checked", xnetChecked}, {"unchecked", xnetUnchecked}, {"unknown", xnetUnknown}} {
		for _, tc := range []struct {
			name     string
			cfg      Config
			cautious bool
		}{
			{"kept_alive", Config{}, false},
			{"strict", Config{StrictMaxConcurrentStreams: true}, true},
			{"single_use", Config{DisableKeepAlives: true}, true},
		} {
			t.Run(built.name+"/"+tc.name, func(t *testing.T) {
				open := builtXnet
				builtXnet = func() xnetBuilt { return built.x }
				t.Cleanup(func() { builtXnet = open })
				want := built.x == xnetChecked || built.x == xnetUnknown && !tc.cautious
				rs := startRawServer(t, testpeer.H2OK)
				c, err := NewClientConn(dialH2(t, rs.Addr(), false), tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if got := c.inUseHanded.Load(); got != want {
					t.Fatalf("marked = %v, want %v", got, want)
				}
			})
		}
	}
}

// deathRecorder is the death watch, recording x/net's first MarkDead.
type deathRecorder struct {
	deathWatch
	once sync.Once
	dead chan struct{} // closed at the first MarkDead
}

func (d *deathRecorder) MarkDead(cc *http2.ClientConn) {
	d.once.Do(func() { close(d.dead) })
	d.deathWatch.MarkDead(cc)
}

// TestMarkInUse: a marked connection, kept-alive, strict-limit or
// single-use, sends its first request on stream 1 (the marker spends no
// stream), and when it closes x/net reports its death at once instead of
// after its five-second "unused connection" timer. A single-use connection
// is closed by x/net itself after its one request; unmarked, each
// single-use request would leave such a timer behind.
func TestMarkInUse(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"kept_alive", Config{}},
		{"strict", Config{StrictMaxConcurrentStreams: true}},
		{"single_use", Config{DisableKeepAlives: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams := make(chan uint32, 4)
			rs := startRawServer(t, func(fr *http2.Framer, id uint32) error {
				streams <- id
				return testpeer.H2OK(fr, id)
			})
			rec := &deathRecorder{dead: make(chan struct{})}
			c, t2 := newWatchedConn(t, rs.Addr(), tc.cfg, func(c *Conn) http2.ClientConnPool {
				rec.deathWatch = deathWatch{c}
				return rec
			})
			markInUse(t2, false)
			if !c.inUseHanded.Load() {
				t.Fatal("the marker did not reach x/net's pool path")
			}
			if !c.ReserveStream() {
				t.Fatal("no first stream")
			}
			resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+rs.Addr()+"/", nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got := readAll(t, resp); got != "ok" {
				t.Fatalf("body %q", got)
			}
			if got := <-streams; got != 1 {
				t.Fatalf("first request on stream %d, want 1", got)
			}
			if !tc.cfg.DisableKeepAlives {
				c.Close()
			}
			// x/net reports an unmarked connection only when its timer
			// fires, five seconds after the connection's last activity;
			// a marked one is reported by the closing reader itself. The
			// bound only turns a regression into a failure, not a hang.
			select {
			case <-rec.dead:
			case <-time.After(4 * time.Second):
				t.Fatal("death not reported within 4s: x/net still treats the connection as unused")
			}
		})
	}
}

// TestMarkInUseTakesNothing: the marker goes through x/net's pool path
// only as far as the point where x/net counts the connection as used. It
// must not consume a stream reservation that a request holds (x/net's
// RoundTrip takes "a" reservation, not its own), take a stream ID, or leave
// a stream behind: the reserved request then goes out on stream 1.
func TestMarkInUseTakesNothing(t *testing.T) {
	streams := make(chan uint32, 4)
	rs := startRawServer(t, func(fr *http2.Framer, id uint32) error {
		streams <- id
		return testpeer.H2OK(fr, id)
	})
	c, t2 := newWatchedConn(t, rs.Addr(), Config{}, func(c *Conn) http2.ClientConnPool { return deathWatch{c} })
	cc := c.cc
	if !cc.ReserveNewRequest() {
		t.Fatal("no reservation")
	}
	markInUse(t2, false)
	if !c.inUseHanded.Load() {
		t.Fatal("the marker did not reach x/net's pool path")
	}
	st := cc.State()
	if st.StreamsReserved != 1 || st.StreamsActive != 0 || st.StreamsPending != 0 {
		t.Fatalf("after the marker: %d reserved, %d active, %d pending; want 1, 0, 0",
			st.StreamsReserved, st.StreamsActive, st.StreamsPending)
	}
	resp, err := cc.RoundTrip(newRequest(t, "GET", "http://"+rs.Addr()+"/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "ok" {
		t.Fatalf("body %q", got)
	}
	if got := <-streams; got != 1 {
		t.Fatalf("reserved request on stream %d, want 1", got)
	}
}

// newWatchedConn builds a Conn for the server at addr as NewClientConn
// does, with watch (given the Conn) as x/net's connection pool, but does
// not mark it: the test drives markInUse, or the marker request, itself.
func newWatchedConn(t *testing.T, addr string, cfg Config, watch func(*Conn) http2.ClientConnPool) (*Conn, *http2.Transport) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &Conn{nc: nc, strict: cfg.strict(), singleUse: cfg.DisableKeepAlives, now: time.Now,
		pingTimeout: defaultPingTimeout, peer: newPeerSettings()}
	t2, err := cfg.newTransports(watch(c))
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	cc, err := t2.NewClientConn(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	c.mu.Lock()
	c.cc = cc
	c.idleSince = c.now()
	c.mu.Unlock()
	t.Cleanup(func() { c.Close() })
	return c, t2
}

// TestInUseFallbackWritesNothing: should x/net stop firing the GotConn
// hook, the marker's "Connection" header still makes x/net refuse it
// before any frame goes out. The fallback costs stream 1 (x/net assigns
// the ID before it encodes), so the next real request is stream 3, but
// the server sees no stream before it, and nothing stays reserved or
// active.
func TestInUseFallbackWritesNothing(t *testing.T) {
	var mu sync.Mutex // guards ids
	var ids []uint32
	rs := startRawServer(t, func(fr *http2.Framer, id uint32) error {
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
		return testpeer.H2OK(fr, id)
	})
	c, t2 := newWatchedConn(t, rs.Addr(), Config{}, func(c *Conn) http2.ClientConnPool { return deathWatch{c} })
	// The marker as markInUse builds it, minus its hook (WithContext
	// drops the trace): what x/net gets if it no longer fires GotConn.
	marker := newInUseRequest(context.Background()).WithContext(context.Background())
	resp, err := t2.RoundTrip(marker)
	if err == nil {
		resp.Body.Close()
		t.Fatal("x/net sent the marker: the Connection header fallback is gone")
	}
	if !strings.Contains(err.Error(), "invalid Connection request header") {
		t.Fatalf("marker failed with %v, want x/net's refusal of its Connection header", err)
	}
	if !c.inUseHanded.Load() {
		t.Fatal("the marker did not reach x/net's pool path")
	}
	st := c.cc.State()
	if st.StreamsReserved != 0 || st.StreamsActive != 0 || st.StreamsPending != 0 {
		t.Fatalf("after the fallback: %d reserved, %d active, %d pending; want 0, 0, 0",
			st.StreamsReserved, st.StreamsActive, st.StreamsPending)
	}
	if !c.ReserveStream() {
		t.Fatal("no stream after the fallback")
	}
	resp, err = c.RoundTrip(newRequest(t, "GET", "http://"+rs.Addr()+"/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "ok" {
		t.Fatalf("body %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(ids); got != "[3]" {
		t.Fatalf("server saw streams %s, want [3] (the fallback spends stream 1 and writes nothing)", got)
	}
}

// TestRecoverInUseAbortOnlyOurs: markInUse's recover swallows only the
// marker's own panic; any other panic value escapes unchanged.
func TestRecoverInUseAbortOnlyOurs(t *testing.T) {
	errPanic := errors.New("h2conn test: a panic that is not ours")
	for _, tc := range []struct {
		name    string
		value   any
		escapes bool
	}{
		{"our_sentinel", inUseAbort{}, false},
		{"string", "boom", true},
		{"error", errPanic, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := panicUnderRecover(tc.value)
			switch {
			case !tc.escapes && got != nil:
				t.Fatalf("%v escaped, want it swallowed", got)
			case tc.escapes && got != tc.value:
				t.Fatalf("escaped %#v, want %#v unchanged", got, tc.value)
			}
		})
	}
}

// panicUnderRecover panics with v under a deferred recoverInUseAbort, as
// markInUse runs x/net, and returns what escaped it (nil for nothing).
func panicUnderRecover(v any) (escaped any) {
	defer func() { escaped = recover() }()
	func() {
		defer recoverInUseAbort()
		panic(v)
	}()
	return nil
}
