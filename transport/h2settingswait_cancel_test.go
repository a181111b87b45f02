package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"
)

// cancelBSendC is the rest of TestH2SettingsWaitCancelled's scenario and
// of its net/http twin, once A is held at the server and B is in place
// (waiting for the SETTINGS in ferry, written in net/http): C is sent, B is
// cancelled and must end with context.Canceled, A is released, and A and C
// must be answered.
func cancelBSendC(t *testing.T, rt http.RoundTripper, url string, ctx context.Context, doneA <-chan observation, doneB <-chan error, bcancel context.CancelFunc, releaseA chan struct{}) {
	t.Helper()
	doneC := goObserve(rt, newReq(t, "GET", url+"/c", nil).WithContext(ctx))
	bcancel()
	if err := <-doneB; !errors.Is(err, context.Canceled) {
		t.Fatalf("B: %v, want context.Canceled", err)
	}
	close(releaseA)
	oA, oC := <-doneA, <-doneC
	if oA.Err != "" || oA.Body != "ok" || oC.Err != "" || oC.Body != "ok" {
		t.Fatalf("A: %q %s; C: %q %s", oA.Body, oA.Err, oC.Body, oC.Err)
	}
}

// TestH2SettingsWaitCancelled: a request that waits for a new connection's
// SETTINGS under MaxConnsPerHost (sharedBeforeDial, holding a slot) and is
// cancelled there ends with its context's error, gives its slot back and
// dials nothing; the requests after it (C, sent while B waits: a follower
// of B's dial or a leader of its own) and the held request A are answered
// on the one connection. net/http sends B on that connection at once (no
// wait) and a cancelled B ends with the same error; it dials no other
// connection either.
func TestH2SettingsWaitCancelled(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		s, arrived, releaseA := settingsWaitServer(t)
		tr := settingsWaitTransport(3)
		defer closeIdle(tr)
		waiting := make(chan struct{}, 4)
		tr.h2.beforeSettingsWait = signalTo(waiting)
		url := "http://" + s.Addr()
		// Hang guards only: the outcomes are checked, not the times.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		doneA := goObserve(tr, newReq(t, "GET", url+"/a", nil).WithContext(ctx))
		awaitCh(t, "request A at the server", arrived)

		bctx, bcancel := context.WithCancel(ctx)
		defer bcancel()
		doneB := goRoundTripErr(tr, newReq(t, "GET", url+"/b", nil).WithContext(bctx))
		awaitCh(t, "request B waiting for the SETTINGS", waiting)
		cancelBSendC(t, tr, url, ctx, doneA, doneB, bcancel, releaseA)
		// The slots of B and C came back: a fourth request has one.
		if o := observe(tr, newReq(t, "GET", url+"/d", nil).WithContext(ctx)); o.Err != "" || o.Body != "ok" {
			t.Fatalf("D: %q %s", o.Body, o.Err)
		}
		checkOneDial(t, s, tr, "")
		stressPoolEmpty(t, tr)
	})
}

// TestH2SettingsWaitFoundThenCancelled: the stream a request found after
// waiting for SETTINGS (sharedBeforeDial) is the caller's; cancelled
// before getConn hands it over (the request's wait ends with an error),
// the stream must be given back exactly once: kept, the connection stays
// busy for good (CloseIdleConnections does not close it); given back
// twice, x/net would lose count. The request ends with its context's
// error, and the connection serves the next request.
func TestH2SettingsWaitFoundThenCancelled(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		s, arrived, releaseA := settingsWaitServer(t)
		tr := settingsWaitTransport(2)
		defer closeIdle(tr)
		waiting := make(chan struct{}, 1)
		tr.h2.beforeSettingsWait = signalTo(waiting)
		bctx, bcancel := context.WithCancel(context.Background())
		defer bcancel()
		found := make(chan struct{}, 1)
		tr.h2.settingsWaitFound = func() {
			bcancel() // B is the only request that waits
			found <- struct{}{}
		}
		url := "http://" + s.Addr()
		// Hang guards only: the outcomes are checked, not the times.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		doneA := goObserve(tr, newReq(t, "GET", url+"/a", nil).WithContext(ctx))
		awaitCh(t, "request A at the server", arrived)
		doneB := goRoundTripErr(tr, newReq(t, "GET", url+"/b", nil).WithContext(bctx))
		awaitCh(t, "request B waiting for the SETTINGS", waiting)
		close(releaseA)
		if oA := <-doneA; oA.Err != "" || oA.Body != "ok" {
			t.Fatalf("A: %q %s", oA.Body, oA.Err)
		}
		awaitCh(t, "request B finding a stream", found)
		if err := <-doneB; !errors.Is(err, context.Canceled) {
			t.Fatalf("B: %v, want context.Canceled", err)
		}
		if o := observe(tr, newReq(t, "GET", url+"/d", nil).WithContext(ctx)); o.Err != "" || o.Body != "ok" {
			t.Fatalf("D: %q %s", o.Body, o.Err)
		}
		checkOneDial(t, s, tr, "")
		stressPoolEmpty(t, tr) // B's stream was given back
	})
}

// TestH2SettingsWaitCancelledNetHTTP is TestH2SettingsWaitCancelled's
// scenario against net/http, for comparison: net/http does not wait for
// the SETTINGS (it sends B on the connection at once, under the limit it
// assumes until they come), and B cancelled after writing its headers
// ends with context.Canceled; A and C are answered on the one connection.
func TestH2SettingsWaitCancelledNetHTTP(t *testing.T) {
	s, arrived, releaseA := settingsWaitServer(t)
	tr := &http.Transport{Protocols: protocolsOf("h2c"), MaxConnsPerHost: 3,
		HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}}
	defer tr.CloseIdleConnections()
	url := "http://" + s.Addr()
	// Hang guards only.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	doneA := goObserve(tr, newReq(t, "GET", url+"/a", nil).WithContext(ctx))
	awaitCh(t, "request A at the server", arrived)
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	wrote := make(chan struct{}, 1)
	trace := &httptrace.ClientTrace{WroteHeaders: func() { wrote <- struct{}{} }}
	doneB := goRoundTripErr(tr, newReq(t, "GET", url+"/b", nil).WithContext(httptrace.WithClientTrace(bctx, trace)))
	awaitCh(t, "request B written", wrote)
	cancelBSendC(t, tr, url, ctx, doneA, doneB, bcancel, releaseA)
	if conns, _ := s.Counts(); conns != 1 {
		t.Errorf("the server accepted %d connections, want 1", conns)
	}
}

// TestH2SettingsWaitLimitOne: with MaxConnsPerHost 1 the connection holds
// the only slot, so no request leads a dial and none waits in
// sharedBeforeDial: B waits in the pool until the SETTINGS are known (the
// server sends them once A is released) and is answered on the same connection. Whether B has queued
// before A is released is not forced; both orders must give this outcome.
func TestH2SettingsWaitLimitOne(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		s, arrived, releaseA := settingsWaitServer(t)
		tr := settingsWaitTransport(1)
		defer closeIdle(tr)
		tr.h2.beforeSettingsWait = func() { t.Error("a request waited for SETTINGS with no slot to dial with") }
		url := "http://" + s.Addr()
		// Hang guards only.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		doneA := goObserve(tr, newReq(t, "GET", url+"/a", nil).WithContext(ctx))
		awaitCh(t, "request A at the server", arrived)
		doneB := make(chan observation, 1)
		go func() { doneB <- observe(tr, newReq(t, "GET", url+"/b", nil).WithContext(ctx)) }()
		close(releaseA)
		oA, oB := <-doneA, <-doneB
		if oA.Err != "" || oA.Body != "ok" || oB.Err != "" || oB.Body != "ok" {
			t.Fatalf("A: %q %s; B: %q %s", oA.Body, oA.Err, oB.Body, oB.Err)
		}
		if conns, _ := s.Counts(); conns != 1 {
			t.Errorf("the server accepted %d connections, want 1", conns)
		}
		stressPoolEmpty(t, tr)
	})
}
