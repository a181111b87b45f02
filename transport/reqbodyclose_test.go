package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// How often, and when, the caller's request body is
// closed over HTTP/2 and HTTP/3, side by side with the reference client
// (net/http.Transport for HTTP/2, quic-go's http3.Transport for HTTP/3).
// Each scenario runs once per client in a subtest of its own, so that its
// servers are closed by the subtest's cleanups; the counts are compared once
// every goroutine the scenario started has ended (the reference closes
// bodies asynchronously on some paths), never after a sleep.

// probeBody is a request body that counts its Close calls (safe for
// concurrent use). It yields prefix, then, by mode: EOF; blocks until closed
// (an upload the caller has not finished); or fails with errProbeRead.
type probeBody struct {
	prefix []byte
	mode   probeMode
	closes atomic.Int32
	closed chan struct{} // closed by the first Close
	once   sync.Once
	read   chan struct{} // closed by the first Read
	rOnce  sync.Once
	// guard: a blocked Read gave up after the hang guard (guardAfter, 10 s
	// when zero), nobody having closed the body (the request hung on it).
	guard      atomic.Bool
	guardAfter time.Duration
}

type probeMode int

const (
	probeEOF probeMode = iota
	probeBlock
	probeFail
)

var errProbeRead = errors.New("test: request body read failed")

func newProbeBody(prefix string, mode probeMode) *probeBody {
	return &probeBody{prefix: []byte(prefix), mode: mode, closed: make(chan struct{}), read: make(chan struct{})}
}

func (b *probeBody) Read(p []byte) (int, error) {
	b.rOnce.Do(func() { close(b.read) })
	if len(b.prefix) > 0 {
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		return n, nil
	}
	switch b.mode {
	case probeBlock:
		select {
		case <-b.closed:
			return 0, errors.New("test: read on closed body")
		case <-time.After(cmp.Or(b.guardAfter, 10*time.Second)): // hang guard
			b.guard.Store(true)
			return 0, errors.New("test: body never closed")
		}
	case probeFail:
		return 0, errProbeRead
	}
	return 0, io.EOF
}

func (b *probeBody) Close() error {
	b.closes.Add(1)
	b.once.Do(func() { close(b.closed) })
	return nil
}

// probeLedger records the bodies of one request: the first and each one
// GetBody produced, and how many Close calls each had when RoundTrip
// returned.
type probeLedger struct {
	mu       sync.Mutex // guards bodies, atReturn
	mk       func() *probeBody
	bodies   []*probeBody
	atReturn []int32
}

func newProbeLedger(mk func() *probeBody) *probeLedger { return &probeLedger{mk: mk} }

func (l *probeLedger) body() *probeBody {
	b := l.mk()
	l.mu.Lock()
	l.bodies = append(l.bodies, b)
	l.mu.Unlock()
	return b
}

func (l *probeLedger) getBody() (io.ReadCloser, error) { return l.body(), nil }

// returned snapshots the Close counts as RoundTrip returns.
func (l *probeLedger) returned() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.atReturn = l.atReturn[:0]
	for _, b := range l.bodies {
		l.atReturn = append(l.atReturn, b.closes.Load())
	}
}

// final is "bodies N; closes a b ...", the final count of each body.
func (l *probeLedger) final() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("bodies %d; closes", len(l.bodies))
	for _, b := range l.bodies {
		s += fmt.Sprintf(" %d", b.closes.Load())
		if b.guard.Load() {
			s += " (hung: a Read blocked until the hang guard)"
		}
	}
	return s
}

// whenClosed is the Close counts at RoundTrip's return (informational:
// asynchronous closes make it timing-dependent for the reference).
func (l *probeLedger) whenClosed() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.atReturn)
}

// closeScenario is one request of a close-count comparison: run sends it
// through rt and returns what the caller saw (without the close counts).
type closeScenario func(t *testing.T, impl string, l *probeLedger) string

// compareCloses runs sc for the reference (impls[0]) and "ferry" in
// subtests of their own, waits until every goroutine the run started has
// ended, and compares the outcome and the final Close counts. When they
// differ: skip, if set, skips with that reason; refDiffers, if set, says
// why the reference is not followed there, and the difference is logged.
// It returns ferry's ledger for the caller's own checks.
func compareCloses(t *testing.T, impls [2]string, mk func() *probeBody, sc closeScenario, skip, refDiffers string) *probeLedger {
	t.Helper()
	var got [2]string
	var when [2]string
	var l *probeLedger
	for i, impl := range impls {
		before := goleak.IgnoreCurrent()
		l = newProbeLedger(mk)
		var outcome string
		t.Run(impl, func(t *testing.T) { outcome = sc(t, impl, l) })
		noGoroutinesSince(t, before)
		got[i] = outcome + "; " + l.final()
		when[i] = l.whenClosed()
	}
	t.Logf("%s: %s (closes at return %s; ferry's %s)", impls[0], got[0], when[0], when[1])
	if got[0] != got[1] {
		switch {
		case skip != "":
			t.Skipf("test: %s\n%s: %s\nferry:    %s", skip, impls[0], got[0], got[1])
		case refDiffers != "":
			t.Logf("known difference (%s)\n%s: %s\nferry:    %s", refDiffers, impls[0], got[0], got[1])
		default:
			t.Errorf("differ\n%s: %s\nferry:    %s", impls[0], got[0], got[1])
		}
	}
	return l
}

// closedOnceEach fails t unless every body of l was closed exactly once
// and no Read hung.
func closedOnceEach(t *testing.T, l *probeLedger) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, b := range l.bodies {
		if n := b.closes.Load(); n != 1 || b.guard.Load() {
			t.Errorf("ferry: body %d closed %d times (hung: %v), want once", i, n, b.guard.Load())
		}
	}
}

// outcomeOf reads the response to its end and closes it, and returns a
// summary: status and body, or the error with addresses normalised.
func outcomeOf(resp *http.Response, err error) string {
	if err != nil {
		return "error: " + normalizeErr(err)
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := fmt.Sprintf("%s %d %q", resp.Proto, resp.StatusCode, b)
	if rerr != nil {
		s += " readErr"
	}
	return s
}

// sendProbe sends a POST of l's first body to u through rt (with GetBody
// when getBody; the request's context cancelled as soon as the body is
// first read when cancelAfterRead), records the counts at return, and
// describes the outcome.
func sendProbe(t *testing.T, rt http.RoundTripper, u string, l *probeLedger, cl int64, getBody, cancelAfterRead bool) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := l.body()
	if cancelAfterRead {
		go func() {
			select {
			case <-first.read:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	req, err := http.NewRequestWithContext(ctx, "POST", u, first)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = cl
	if getBody {
		req.GetBody = l.getBody
	}
	resp, err := rt.RoundTrip(req)
	l.returned()
	out := outcomeOf(resp, err)
	closeIdle(rt)
	return out
}

// errorKindOnly keeps only whether a summary is an error, for scenarios
// whose error texts differ between the clients for reasons that are not
// the body's (the close counts are what is compared).
func errorKindOnly(s string) string {
	if strings.HasPrefix(s, "error: ") {
		return "error"
	}
	return s
}
