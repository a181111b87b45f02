package h3conn

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// closer is a stand-in connection for the racing logic alone.
type closer struct {
	closed atomic.Bool
	done   chan struct{} // closed by the first Close
}

func newCloser() *closer { return &closer{done: make(chan struct{})} }

func (c *closer) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		close(c.done)
	}
	return nil
}

// manualTimer is an injected head-start clock that fires when told.
type manualTimer struct {
	ch      chan time.Time
	stopped atomic.Bool
}

func newManualTimer() *manualTimer { return &manualTimer{ch: make(chan time.Time, 1)} }

func (m *manualTimer) after(time.Duration) (<-chan time.Time, func() bool) {
	return m.ch, func() bool { m.stopped.Store(true); return true }
}

func (m *manualTimer) fire() { m.ch <- time.Time{} }

// gatedDial is a dial that completes when told, with the given outcome.
type gatedDial struct {
	release chan struct{}
	conn    *closer
	err     error
	sawCtx  chan context.Context
}

func newGatedDial(err error) *gatedDial {
	return &gatedDial{release: make(chan struct{}), conn: newCloser(), err: err, sawCtx: make(chan context.Context, 1)}
}

func (g *gatedDial) dial(ctx context.Context) (*closer, error) {
	g.sawCtx <- ctx
	<-g.release
	if g.err != nil {
		return nil, g.err
	}
	return g.conn, nil
}

type lateOutcome struct {
	conn *closer
	err  error
}

type ctxKey struct{}

func TestRace(t *testing.T) {
	errDial := errors.New("handshake failed")
	tests := []struct {
		name     string
		dialErr  error
		step     func(g *gatedDial, tm *manualTimer, tcp chan struct{}, cancel context.CancelFunc)
		wantConn bool
		wantErr  error // checked with errors.Is
		wantLate bool  // the outcome goes to Late
	}{
		{
			name:     "quic_wins",
			step:     func(g *gatedDial, tm *manualTimer, tcp chan struct{}, cancel context.CancelFunc) { close(g.release) },
			wantConn: true,
		},
		{
			name:    "quic_fails_within_head_start",
			dialErr: errDial,
			step:    func(g *gatedDial, tm *manualTimer, tcp chan struct{}, cancel context.CancelFunc) { close(g.release) },
			wantErr: errDial,
		},
		{
			name:     "head_start_expires",
			step:     func(g *gatedDial, tm *manualTimer, tcp chan struct{}, cancel context.CancelFunc) { tm.fire() },
			wantErr:  ErrHeadStartExpired,
			wantLate: true,
		},
		{
			name:     "head_start_expires_then_quic_fails",
			dialErr:  errDial,
			step:     func(g *gatedDial, tm *manualTimer, tcp chan struct{}, cancel context.CancelFunc) { tm.fire() },
			wantErr:  ErrHeadStartExpired,
			wantLate: true,
		},
		{
			name:     "tcp_ready_first",
			step:     func(g *gatedDial, tm *manualTimer, tcp chan struct{}, cancel context.CancelFunc) { close(tcp) },
			wantErr:  ErrHeadStartExpired,
			wantLate: true,
		},
		{
			name:     "request_cancelled",
			step:     func(g *gatedDial, tm *manualTimer, tcp chan struct{}, cancel context.CancelFunc) { cancel() },
			wantErr:  context.Canceled,
			wantLate: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGatedDial(tt.dialErr)
			tm := newManualTimer()
			tcp := make(chan struct{})
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
			defer cancel()
			late := make(chan lateOutcome, 1)
			type raced struct {
				c   *closer
				err error
			}
			done := make(chan raced, 1)
			go func() {
				c, err := Race(ctx, g.dial, RaceOptions[*closer]{
					HeadStart: time.Hour, // only the manual timer ends it
					TCPReady:  tcp,
					Late:      func(c *closer, err error) { late <- lateOutcome{c, err} },
					After:     tm.after,
				})
				done <- raced{c, err}
			}()
			dctx := <-g.sawCtx
			if dctx.Value(ctxKey{}) != "v" {
				t.Error("dial context lost the request's values")
			}
			tt.step(g, tm, tcp, cancel)
			r := <-done
			if tt.wantConn != (r.c != nil) || !errors.Is(r.err, tt.wantErr) {
				t.Fatalf("Race = %v, %v; want conn %v err %v", r.c, r.err, tt.wantConn, tt.wantErr)
			}
			if tt.dialErr != nil && !tt.wantLate {
				if _, ok := errors.AsType[*QUICError](r.err); !ok {
					t.Errorf("a QUIC failure is not a *QUICError: %T", r.err)
				}
			}
			if !tt.wantLate {
				select {
				case o := <-late:
					t.Fatalf("Late called with %v, %v although Race returned the outcome", o.conn, o.err)
				default:
				}
				return
			}
			if dctx.Err() != nil {
				t.Error("the background dial was cancelled with the request")
			}
			close(g.release) // the dial completes after Race returned
			o := <-late
			if (o.conn != nil) != (tt.dialErr == nil) || !errors.Is(o.err, tt.dialErr) {
				t.Errorf("Late got %v, %v; want dial error %v", o.conn, o.err, tt.dialErr)
			}
			if o.conn != nil && o.conn.closed.Load() {
				t.Error("a connection handed to Late was closed")
			}
		})
	}
}

func TestRaceLateWithoutCallbackClosesConn(t *testing.T) {
	g := newGatedDial(nil)
	tm := newManualTimer()
	tm.fire()
	_, err := Race(context.Background(), g.dial, RaceOptions[*closer]{After: tm.after})
	if !errors.Is(err, ErrHeadStartExpired) {
		t.Fatalf("err = %v", err)
	}
	close(g.release)
	<-g.conn.done // hangs (test timeout) if a late conn with no taker is not closed
	if !tm.stopped.Load() {
		t.Error("head start timer not stopped")
	}
}

func TestRaceNoWait(t *testing.T) {
	g := newGatedDial(nil)
	late := make(chan lateOutcome, 1)
	_, err := Race(context.Background(), g.dial, RaceOptions[*closer]{
		HeadStart: -1,
		Late:      func(c *closer, err error) { late <- lateOutcome{c, err} },
	})
	if !errors.Is(err, ErrHeadStartExpired) {
		t.Fatalf("negative head start: err = %v, want ErrHeadStartExpired at once", err)
	}
	close(g.release)
	if o := <-late; o.conn != g.conn || o.err != nil {
		t.Fatalf("Late got %v, %v", o.conn, o.err)
	}
}

func TestRaceContextAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := Race(ctx, func(context.Context) (*closer, error) { called = true; return newCloser(), nil }, RaceOptions[*closer]{})
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("err = %v, dial called %v; want Canceled without a dial", err, called)
	}
}

// TestRaceBlackholeFallsBackToTCP races a real dial into a UDP socket that
// swallows every packet: Race gives up after the (small, injected) head start,
// the request goes over TCP, and the QUIC dial ends cleanly when the Dialer
// closes.
func TestRaceBlackholeFallsBackToTCP(t *testing.T) {
	bh := startBlackhole(t)
	tcp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tcp") }))
	defer tcp.Close()
	d := NewDialer(Config{HandshakeTimeout: time.Minute})
	late := make(chan error, 1)
	start := time.Now()
	c, err := Race(context.Background(), func(ctx context.Context) (*Conn, error) {
		return d.Dial(ctx, "localhost", bh.addr())
	}, RaceOptions[*Conn]{
		HeadStart: 20 * time.Millisecond,
		Late: func(c *Conn, err error) {
			if c != nil {
				c.Close()
			}
			late <- err
		},
	})
	if c != nil || !errors.Is(err, ErrHeadStartExpired) {
		t.Fatalf("Race = %v, %v; want ErrHeadStartExpired", c, err)
	}
	resp, err := tcp.Client().Get(tcp.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "tcp" {
		t.Fatalf("TCP body %q", body)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("fallback took %v", elapsed) // loose: the tight figure is BenchmarkFallback
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-late; !errors.Is(err, ErrDialerClosed) {
		t.Fatalf("background dial ended with %v, want ErrDialerClosed", err)
	}
	tcp.Client().CloseIdleConnections()
}

// TestRaceRealQUIC: QUIC wins against a live server; with no head start at
// all the connection still arrives through Late and serves a request.
func TestRaceRealQUIC(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	d := newTestDialer(t, s, nil)
	dial := func(ctx context.Context) (*Conn, error) { return d.Dial(ctx, "localhost", s.addr()) }

	c, err := Race(context.Background(), dial, RaceOptions[*Conn]{HeadStart: time.Minute})
	if err != nil {
		t.Fatalf("QUIC lost a race with a one-minute head start: %v", err)
	}
	c.Close()

	late := make(chan *Conn, 1)
	_, err = Race(context.Background(), dial, RaceOptions[*Conn]{HeadStart: -1, Late: func(c *Conn, err error) {
		if err != nil {
			t.Errorf("late dial: %v", err)
		}
		late <- c
	}})
	if !errors.Is(err, ErrHeadStartExpired) {
		t.Fatalf("err = %v", err)
	}
	lc := <-late
	if lc == nil {
		t.Fatal("no late connection")
	}
	req, _ := http.NewRequest("GET", "https://localhost/", nil)
	resp, err := lc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
