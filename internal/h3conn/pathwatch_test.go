package h3conn

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"github.com/quic-go/quic-go"
)

// TestPathWatchLook runs the judgement on made-up counters: what starts a
// run, what ends it, and when it is long enough to call the path dead.
func TestPathWatchLook(t *testing.T) {
	const deadAfter = time.Second
	type step struct {
		at         time.Duration // since the first look
		sent, recv uint64
		want       pathVerdict
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"idle connection stays quiet", []step{
			{0, 10, 10, pathActive}, {100 * ms, 10, 10, pathQuiet}, {5 * time.Second, 10, 10, pathQuiet},
		}},
		{"the ACK of the last packet is no run", []step{
			{0, 10, 10, pathActive}, {100 * ms, 11, 10, pathActive}, {30 * time.Second, 11, 10, pathQuiet},
		}},
		{"answered packets are no run", []step{
			{0, 10, 10, pathActive}, {100 * ms, 20, 15, pathActive}, {200 * ms, 30, 20, pathActive},
			{2 * time.Second, 40, 21, pathActive},
		}},
		{"unanswered packets with probes are a dead path", []step{
			{0, 10, 10, pathActive}, {100 * ms, 12, 10, pathWaiting}, {600 * ms, 16, 10, pathWaiting},
			{1099 * ms, 20, 10, pathWaiting}, {1100 * ms, 20, 10, pathDead},
		}},
		{"an answer ends the run", []step{
			{0, 10, 10, pathActive}, {100 * ms, 12, 10, pathWaiting}, {1000 * ms, 18, 10, pathWaiting},
			{1050 * ms, 19, 11, pathActive}, {1200 * ms, 19, 11, pathQuiet}, {1300 * ms, 21, 11, pathWaiting},
			{2299 * ms, 30, 11, pathWaiting}, {2300 * ms, 30, 11, pathDead},
		}},
		{"no probes sent (process suspended): not yet dead", []step{
			{0, 10, 10, pathActive}, {100 * ms, 12, 10, pathWaiting}, {3 * time.Second, 13, 10, pathWaiting},
			{3100 * ms, 14, 10, pathDead},
		}},
		{"the ACK, a long silence, then a burst: the run starts at the burst", []step{
			{0, 10, 10, pathActive}, {100 * ms, 11, 10, pathActive}, {20 * time.Second, 11, 10, pathQuiet},
			{20100 * ms, 40, 10, pathWaiting}, {20500 * ms, 44, 10, pathWaiting}, {21100 * ms, 44, 10, pathDead},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w pathWatch
			t0 := time.Unix(1000, 0)
			for i, s := range tc.steps {
				got := w.look(pathSample{sent: s.sent, received: s.recv}, t0.Add(s.at), deadAfter)
				if got != s.want {
					t.Fatalf("step %d (%v, sent %d, received %d): %v, want %v", i, s.at, s.sent, s.recv, got, s.want)
				}
			}
		})
	}
}

const ms = time.Millisecond

func TestPathWatchDeadAfter(t *testing.T) {
	if got := deadAfter(200*ms, 10*ms); got != 15*(200+40+25)*ms {
		t.Errorf("deadAfter(200ms, 10ms) = %v, want 15 PTOs", got)
	}
	if got := deadAfter(20*ms, 0); got != deadMinDuration {
		t.Errorf("deadAfter on loopback = %v, want the floor %v", got, deadMinDuration)
	}
	if got := deadAfter(0, 0); got != 15*(100+1+25)*ms {
		t.Errorf("deadAfter without an RTT sample = %v", got)
	}
	if got := watchInterval(deadMinDuration); got != 125*ms {
		t.Errorf("watchInterval(1s) = %v", got)
	}
}

// dialThroughRelay dials s through a relay that can cut the path, with
// the Dialer's OnPathDead calls recorded; mod, if not nil, sets the rest of
// its Config. It returns the Conn, its Dialer, the relay and the record.
func dialThroughRelay(t *testing.T, s *h3Server, mod func(*Config)) (*Conn, *Dialer, *testpeer.UDPRelay, *deadPathRecorder) {
	t.Helper()
	relay := testpeer.StartUDPRelay(t, s.addr())
	rec := new(deadPathRecorder)
	d := newTestDialer(t, s, func(c *Config) {
		c.OnPathDead = rec.record
		if mod != nil {
			mod(c)
		}
	})
	c, err := d.Dial(context.Background(), "localhost", relay.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return c, d, relay, rec
}

// deadPathRecorder collects the OnPathDead calls of a Dialer.
type deadPathRecorder struct {
	mu    sync.Mutex // guards conns
	conns []*Conn
}

func (r *deadPathRecorder) record(c *Conn) {
	if !c.PathDead() || c.Usable() {
		panic("OnPathDead called for a connection still in use")
	}
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

func (r *deadPathRecorder) calls() []*Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Conn(nil), r.conns...)
}

// holdHandler answers /hold once release is closed (or the request ends),
// /slow after d, and everything else at once; POST bodies are read first.
func holdHandler(release <-chan struct{}, d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/hold":
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		case "/slow":
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "ok")
	}
}

func get(ctx context.Context, c *Conn, path string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://localhost"+path, nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestDeadPathClosesConn: the path dies (the relay drops everything) under
// a request in flight and a new one is sent; the unacknowledged request
// frames make the Conn judge the path dead long before the request's own
// deadline or QUIC's idle timeout: OnPathDead is called once, the Conn
// takes no request, and both requests fail with ErrPathDead (the one
// reading its body, too).
func TestDeadPathClosesConn(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := startH3(t, holdHandler(release, 0), "localhost")
	c, d, relay, rec := dialThroughRelay(t, s, func(c *Config) {
		c.IdleTimeout = time.Minute // the idle timeout must not be what ends it
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // hang guard
	defer cancel()
	if body, err := get(ctx, c, "/"); err != nil || body != "ok" {
		t.Fatalf("before the cut: %q %v", body, err)
	}

	relay.Silence()
	start := time.Now()
	_, err := get(ctx, c, "/")
	if !errors.Is(err, ErrPathDead) {
		t.Fatalf("request on the dead path: %v (%T), want ErrPathDead", err, err)
	}
	t.Logf("judged dead after %v: %v", time.Since(start), err)
	if calls := rec.calls(); len(calls) != 1 || calls[0] != c {
		t.Errorf("OnPathDead calls: %d, want 1 for the connection", len(calls))
	}
	if c.Usable() || c.ReserveStream() {
		t.Error("the connection still takes requests")
	}
	if _, err := get(ctx, c, "/"); !IsRetryable(err) {
		t.Errorf("request after: %v, want an unsent retryable error", err)
	}
	waitFor(t, func() bool { return d.LocalAddr() == nil }) // socket released
}

// TestDeadPathFailsBodyRead: a response body being read when the path is
// judged dead fails with ErrPathDead instead of waiting for its deadline.
func TestDeadPathFailsBodyRead(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	s := startH3(t, http.HandlerFunc(h), "localhost")
	c, _, relay, rec := dialThroughRelay(t, s, func(c *Config) { c.IdleTimeout = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://localhost/", nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 7)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	relay.Silence()
	// Something ack-eliciting must leave the client: another request.
	go get(ctx, c, "/")
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, ErrPathDead) {
		t.Fatalf("body read on the dead path: %v, want ErrPathDead", err)
	}
	if len(rec.calls()) != 1 {
		t.Errorf("OnPathDead calls: %d, want 1", len(rec.calls()))
	}
}

// TestSlowServerOnHealthyPath: a server that holds its answers for
// several times the dead-path threshold, on a path that works, while the
// client sends (a slow upload, a cancelled request) and while it is silent:
// every answer comes, the Conn is never judged dead and stays usable.
func TestSlowServerOnHealthyPath(t *testing.T) {
	const hold = 3 * time.Second // 3 times the dead-path threshold on loopback
	s := startH3(t, holdHandler(nil, hold), "localhost")
	// The relay forwards everything.
	c, _, _, rec := dialThroughRelay(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(3)
	go func() { // silent: nothing to send while the server holds the answer
		defer wg.Done()
		if body, err := get(ctx, c, "/slow"); err != nil || body != "ok" {
			errs <- errors.New("silent GET: " + body + ": " + errString(err))
		}
	}()
	go func() { // a slow upload: a chunk every 250 ms for the whole hold
		defer wg.Done()
		pr, pw := io.Pipe()
		go func() {
			for i := 0; i < int(hold/(250*ms)); i++ {
				time.Sleep(250 * ms)
				pw.Write([]byte(strings.Repeat("x", 100)))
			}
			pw.Close()
		}()
		req, _ := http.NewRequestWithContext(ctx, "POST", "https://localhost/slow", pr)
		resp, err := c.RoundTrip(req)
		if err != nil {
			errs <- errors.New("slow upload: " + err.Error())
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "ok" {
			errs <- errors.New("slow upload: " + string(b) + ": " + errString(err))
		}
	}()
	go func() { // a request cancelled during the hold (RESET_STREAM, STOP_SENDING)
		defer wg.Done()
		time.Sleep(hold / 2)
		cctx, ccancel := context.WithCancel(ctx)
		time.AfterFunc(100*ms, ccancel)
		if _, err := get(cctx, c, "/slow"); !errors.Is(err, context.Canceled) {
			errs <- errors.New("cancelled GET: " + errString(err))
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(rec.calls()); n != 0 || c.PathDead() || !c.Usable() {
		t.Fatalf("healthy path judged dead (OnPathDead calls %d, PathDead %v, Usable %v)", n, c.PathDead(), c.Usable())
	}
	if body, err := get(ctx, c, "/"); err != nil || body != "ok" {
		t.Fatalf("after the hold: %q %v", body, err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// waitFor polls cond for up to 10 s (a hang guard, not a timing check).
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * ms)
	}
}

// TestPathWatchRestart: a watch that restarts (the connection was idle and
// quiet, and a request starts) forgets what it saw before: packets sent
// while it was off (keep-alive PINGs, answered) start no run, and a run it
// was in is over.
func TestPathWatchRestart(t *testing.T) {
	const deadAfter = time.Second
	t0 := time.Unix(1000, 0)
	var w pathWatch
	steps := []struct {
		at         time.Duration
		sent, recv uint64
		want       pathVerdict
	}{
		{0, 10, 10, pathActive}, {100 * ms, 12, 10, pathWaiting}, // a run
	}
	for i, s := range steps {
		if got := w.look(pathSample{sent: s.sent, received: s.recv}, t0.Add(s.at), deadAfter); got != s.want {
			t.Fatalf("step %d: %v, want %v", i, got, s.want)
		}
	}
	// Off for a while: 8 packets sent and answered meanwhile.
	w.restart(pathSample{sent: 20, received: 14})
	if got := w.look(pathSample{sent: 21, received: 14}, t0.Add(30*time.Second), deadAfter); got != pathActive {
		t.Fatalf("after the restart, the request's packet: %v, want pathActive", got)
	}
	if got := w.look(pathSample{sent: 21, received: 14}, t0.Add(32*time.Second), deadAfter); got != pathQuiet {
		t.Fatalf("after the restart, nothing moves: %v, want pathQuiet", got)
	}
}

// TestDeadPathWhileWaiting: the path dies while the only request waits for
// its answer and the client has nothing to send; the watch, which must not
// have stopped while that request is in flight, judges the path dead from
// the keep-alive PING and its probes (the period is shortened to keep the
// test short), and the request fails with ErrPathDead.
func TestDeadPathWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := startH3(t, holdHandler(release, 0), "localhost")
	c, _, relay, rec := dialThroughRelay(t, s, func(c *Config) {
		c.QUICConfig = &quic.Config{KeepAlivePeriod: 500 * ms, MaxIdleTimeout: time.Minute}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // hang guard
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := get(ctx, c, "/hold")
		errc <- err
	}()
	// Wait until the request is in flight, and for the connection to be
	// quiet between its keep-alives for many looks (watchInterval is
	// 125 ms on loopback), then cut the path.
	waitFor(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.active == 1
	})
	time.Sleep(1500 * ms)
	relay.Silence()
	if err := <-errc; !errors.Is(err, ErrPathDead) {
		t.Fatalf("waiting request on the dead path: %v, want ErrPathDead", err)
	}
	if len(rec.calls()) != 1 {
		t.Errorf("OnPathDead calls: %d, want 1", len(rec.calls()))
	}
}
