package h3conn

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGoAway: the server shuts down gracefully with a request in flight. The
// in-flight request completes; a new request fails retryable, unsent, with
// its body untouched; the connection is no longer Usable.
func TestGoAway(t *testing.T) {
	inFlight := make(chan struct{})
	finish := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(inFlight)
			<-finish
		}
		io.WriteString(w, "done "+r.URL.Path)
	})
	s := startH3(t, h, "localhost")
	d := newTestDialer(t, s, nil)
	c := dialTest(t, d, s)

	slow := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", "https://localhost/slow", nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			slow <- err
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && string(b) != "done /slow" {
			err = errors.New("in-flight body " + string(b))
		}
		slow <- err
	}()
	<-inFlight
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- s.srv.Shutdown(context.Background()) }()

	// Until the client has read the GOAWAY, new requests may still be
	// served (the server took them before the GOAWAY) or rejected with
	// H3_REQUEST_REJECTED (retryable, but sent); after it they fail before
	// being sent. Wait for that, bounded.
	var err error
	var body *trackedBody
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		body = &trackedBody{Reader: strings.NewReader("payload")}
		req, _ := http.NewRequest("POST", "https://localhost/new", body)
		var resp *http.Response
		resp, err = c.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		} else if re, ok := errors.AsType[*RetryableError](err); !ok {
			t.Fatalf("request during shutdown: %v, want retryable", err)
		} else if re.Unsent {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if re, ok := errors.AsType[*RetryableError](err); !ok || !re.Unsent {
		t.Fatalf("request after GOAWAY: %v, want unsent retryable", err)
	}
	if body.read || body.closed {
		t.Errorf("unsent request's body was read %v / closed %v", body.read, body.closed)
	}
	if c.Usable() {
		t.Error("connection still Usable after GOAWAY")
	}
	if c.ReserveStream() {
		t.Error("ReserveStream succeeded after GOAWAY")
	}
	close(finish)
	if err := <-slow; err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	if err := <-shutdownDone; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// trackedBody records what was done to a request body.
type trackedBody struct {
	io.Reader
	mu           sync.Mutex // guards read, closed
	read, closed bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.read = true
	b.mu.Unlock()
	return b.Reader.Read(p)
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func TestStreamAccounting(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	now := time.Unix(1000, 0)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	advance := func(d time.Duration) { clockMu.Lock(); now = now.Add(d); clockMu.Unlock() }
	d := newTestDialer(t, s, func(c *Config) { c.MaxConcurrentStreams = 2; c.Now = clock })
	c := dialTest(t, d, s)

	since, idle := c.IdleSince()
	if !idle || !since.Equal(time.Unix(1000, 0)) {
		t.Fatalf("fresh conn IdleSince = %v, %v", since, idle)
	}
	if !c.ReserveStream() || !c.ReserveStream() {
		t.Fatal("ReserveStream refused below the cap")
	}
	if c.ReserveStream() {
		t.Fatal("ReserveStream beyond MaxConcurrentStreams")
	}
	if _, idle := c.IdleSince(); idle {
		t.Fatal("idle with reserved streams")
	}
	if c.CloseIfIdle() {
		t.Fatal("CloseIfIdle closed a conn with reservations")
	}
	c.ReleaseStream()
	req, _ := http.NewRequest("GET", "https://localhost/", nil)
	resp, err := c.RoundTrip(req) // uses the remaining reservation
	if err != nil {
		t.Fatal(err)
	}
	if !c.ReserveStream() {
		t.Fatal("cap not freed by ReleaseStream")
	}
	if c.ReserveStream() {
		t.Fatal("one in flight + one reserved should fill a cap of 2")
	}
	c.ReleaseStream()
	advance(time.Minute)
	resp.Body.Close() // body closed early: the slot comes back
	since, idle = c.IdleSince()
	if !idle || !since.Equal(time.Unix(1060, 0)) {
		t.Fatalf("after the body closed IdleSince = %v, %v; want 1060, true", since, idle)
	}
	if !c.CloseIfIdle() || c.Usable() {
		t.Fatal("CloseIfIdle did not close an idle conn")
	}
	_, err = c.RoundTrip(req)
	if re, ok := errors.AsType[*RetryableError](err); !ok || !re.Unsent || !errors.Is(err, ErrConnUnusable) {
		t.Fatalf("RoundTrip on a closed conn: %v, want unsent retryable ErrConnUnusable", err)
	}
}

// TestPeerCloseMakesConnUnusable: the server goes away without GOAWAY; the
// conn becomes unusable and a new request fails retryable and unsent.
func TestPeerCloseMakesConnUnusable(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	d := newTestDialer(t, s, nil)
	c := dialTest(t, d, s)
	s.srv.Close() // closes the QUIC connections with an application error
	<-c.q.Context().Done()
	req, _ := http.NewRequest("POST", "https://localhost/", strings.NewReader("x"))
	_, err := c.RoundTrip(req)
	if re, ok := errors.AsType[*RetryableError](err); !ok || !re.Unsent {
		t.Fatalf("RoundTrip on a conn the peer closed: %v, want unsent retryable", err)
	}
	if c.Usable() {
		t.Error("Usable after the peer closed")
	}
}

// TestDialerCloseReleasesEverything: Close closes the conns and the socket,
// later Dials fail, and the process's descriptors are back where they were.
func TestDialerCloseReleasesEverything(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	before := countFDs(t)
	d := NewDialer(Config{TLSConfig: s.clientConfig()})
	conns := make([]*Conn, 3)
	for i := range conns {
		conns[i] = dialTest(t, d, s)
	}
	if d.LocalAddr() == nil {
		t.Fatal("no socket after Dial")
	}
	if got := countFDs(t); got > before+2 {
		t.Errorf("3 connections use %d descriptors, want one socket", got-before)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range conns {
		if c.Usable() {
			t.Errorf("conn %d usable after Dialer.Close", i)
		}
	}
	if _, err := d.Dial(context.Background(), "localhost", s.addr()); !errors.Is(err, ErrDialerClosed) {
		t.Errorf("Dial after Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if after := countFDs(t); after > before {
		t.Errorf("descriptors: %d before, %d after Close", before, after)
	}
}

func TestDialHonoursContext(t *testing.T) {
	bh := startBlackhole(t)
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		timeout time.Duration
		want    error
	}{
		{name: "cancelled", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, want: context.Canceled},
		{name: "handshake_timeout", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, timeout: 30 * time.Millisecond, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDialer(Config{HandshakeTimeout: tt.timeout})
			defer d.Close()
			ctx, cancel := tt.ctx()
			defer cancel()
			_, err := d.Dial(ctx, "localhost", bh.addr())
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestDialerReleasesSocketWhenUnused: once the last connection closed (and
// after a dial that failed, with none left), the UDP socket and its
// descriptor are released without Close; the next Dial opens a new one.
func TestDialerReleasesSocketWhenUnused(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	bh := startBlackhole(t)
	d := newTestDialer(t, s, nil)
	before := -1 // descriptors once the first step's lazy setup is done
	for _, step := range []string{"last_conn_closed", "failed_dial", "redial"} {
		switch step {
		case "last_conn_closed", "redial":
			a, b := dialTest(t, d, s), dialTest(t, d, s)
			a.Close()
			if d.LocalAddr() == nil {
				t.Fatalf("%s: socket released while a connection is open", step)
			}
			b.Close()
		case "failed_dial":
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			_, err := d.Dial(ctx, "localhost", bh.addr())
			cancel()
			if err == nil {
				t.Fatal("dial to a blackhole succeeded")
			}
		}
		if d.LocalAddr() != nil {
			t.Fatalf("%s: socket still open with no connection", step)
		}
		// The descriptor of a closed socket goes away once quic-go's
		// reader returns from its blocked read: poll, with a hang guard.
		if before < 0 {
			before = countFDs(t)
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for after := countFDs(t); after > before; after = countFDs(t) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: descriptors: %d after the first release, %d now", step, before, after)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestDialerKeepsSocketDuringDial: the last connection closing while a
// dial is in progress does not close the socket under that dial (which
// would fail with quic-go's "transport closed"); the socket goes once the
// dial ends with no connection left.
func TestDialerKeepsSocketDuringDial(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	bh := startBlackhole(t)
	d := newTestDialer(t, s, nil)
	last := dialTest(t, d, s)
	started := make(chan struct{})
	trace := &httptrace.ClientTrace{ConnectStart: func(string, string) { close(started) }}
	ctx, cancel := context.WithCancel(httptrace.WithClientTrace(context.Background(), trace))
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		c, err := d.Dial(ctx, "localhost", bh.addr()) // hangs until cancel
		if c != nil {
			c.Close()
		}
		errc <- err
	}()
	<-started // the dial has the socket
	last.Close()
	if d.LocalAddr() == nil {
		t.Fatal("socket released with a dial in progress")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the dial in progress ended with %v, want context.Canceled", err)
	}
	if d.LocalAddr() != nil {
		t.Fatal("socket kept after the dial ended with no connection left")
	}
}

// TestDialerCloseWaitsForRelease: Close called while the last
// connection's close is releasing the socket returns only once that
// release is done (it returned at once, leaving the socket and quic-go's
// reader alive after Close). Close is seen waiting by the state of its
// goroutine, not by a timer.
func TestDialerCloseWaitsForRelease(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	d := newTestDialer(t, s, nil)
	c := dialTest(t, d, s)
	held, proceed := make(chan struct{}), make(chan struct{})
	d.beforeRelease = func() { close(held); <-proceed }
	connClosed := make(chan struct{})
	go func() { c.Close(); close(connClosed) }()
	<-held // the socket is taken, not closed yet
	closeDone := make(chan struct{})
	go func() { d.Close(); close(closeDone) }()
	for !goroutineBlocked("[sync.WaitGroup.Wait", "(*Dialer).Close") {
		select {
		case <-closeDone:
			close(proceed)
			<-connClosed
			t.Fatal("Dialer.Close returned while the socket was still being released")
		default:
			runtime.Gosched()
		}
	}
	close(proceed)
	<-closeDone
	<-connClosed
	if d.LocalAddr() != nil {
		t.Fatal("socket open after Close")
	}
}

// goroutineBlocked reports whether some goroutine is blocked in the state
// named by state (as runtime.Stack prints it) inside function fn.
func goroutineBlocked(state, fn string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(head, state) && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}
