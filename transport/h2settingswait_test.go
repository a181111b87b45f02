package transport

import (
	"context"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// settingsWaitServer is the server of TestH2SecondStreamWaitsForSettingsUnderMaxConns:
// on its first connection it withholds its SETTINGS until request A, the
// first request of that connection, is at the server, then holds A (and
// the SETTINGS, and the reading of that connection) until releaseA is
// closed. It acknowledges no PING, so neither a client that reads the
// SETTINGS frame itself nor one that learns them from a PING ack or a
// response knows them before releaseA.
func settingsWaitServer(t *testing.T) (s *testpeer.H2Server, arrived, releaseA chan struct{}) {
	arrived, releaseA = make(chan struct{}, 1), make(chan struct{})
	s = testpeer.StartH2(t, testpeer.H2Script{
		Settings:  []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 10}},
		NoPingAck: true,
		SettingsAfterHeaders: func(conn int) {
			if conn == 0 {
				arrived <- struct{}{}
				<-releaseA
			}
		},
		OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
			return testpeer.H2OK(fr, id)
		},
	})
	// Registered after StartH2's, so it runs first: a test that failed
	// before releasing A must not leave the server's close waiting on A.
	t.Cleanup(func() {
		select {
		case <-releaseA:
		default:
			close(releaseA)
		}
	})
	return s, arrived, releaseA
}

// settingsWaitTransport is a ferry Transport for settingsWaitServer: h2c
// with prior knowledge, MaxConnsPerHost maxConns, and a SETTINGS probe
// whose PING timeout (an hour) never ends a test's wait.
func settingsWaitTransport(maxConns int) *Transport {
	return From(&http.Transport{Protocols: protocolsOf("h2c"), MaxConnsPerHost: maxConns,
		HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
}

// signalTo returns a hook that signals on ch without blocking (a signal
// already pending is enough).
func signalTo(ch chan struct{}) func() {
	return func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// goObserve sends req through rt on a goroutine of its own; the channel
// receives what it saw.
func goObserve(rt http.RoundTripper, req *http.Request) <-chan observation {
	done := make(chan observation, 1)
	go func() { done <- observe(rt, req) }()
	return done
}

// goRoundTripErr sends req through rt on a goroutine of its own, closes
// the body of a response, and hands over the error.
func goRoundTripErr(rt http.RoundTripper, req *http.Request) <-chan error {
	done := make(chan error, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	return done
}

// checkOneDial fails t unless the server accepted one connection and tr
// dialled one (when Stats counts dials); why says what a second one means.
func checkOneDial(t *testing.T, s *testpeer.H2Server, tr *Transport, why string) {
	t.Helper()
	if conns, _ := s.Counts(); conns != 1 {
		t.Errorf("the server accepted %d connections, want 1%s", conns, why)
	}
	if countStats {
		if d := tr.Stats().Conns.Dialled; d != 1 {
			t.Errorf("Stats.Conns.Dialled = %d, want 1", d)
		}
	}
}

// TestH2SecondStreamWaitsForSettingsUnderMaxConns: under MaxConnsPerHost a
// new HTTP/2 connection refuses a second stream until the server's
// SETTINGS are known (h2conn's OnStreamFree hook). That refusal does not
// mean the connection is full: a request that meets it with a slot free
// must wait for the SETTINGS and take a stream of that connection, as
// requests beyond the first do without a limit (README), not dial a
// connection net/http would not have dialled. Before, it dialled: with a
// server that answers nothing until 10 streams are open
// (TestH2GoAwayWithQueuedWaiters, MaxConnsPerHost 2) the second
// connection served every other request while the first waited for its
// SETTINGS probe, and its requests waited for the server for good.
//
// The server withholds its SETTINGS until request A, the first of its
// first connection, is at the server, then holds both, and never
// acknowledges PING, so nothing proves the SETTINGS before A is released
// (the probe's own limit is an hour). B is sent while A is held; A is answered once B
// waits for the SETTINGS, or once B is answered on a connection of its
// own (the defect). Both must be answered on one connection that ferry
// dialled once; B found its stream in the pool and is no dial.
func TestH2SecondStreamWaitsForSettingsUnderMaxConns(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		s, arrived, releaseA := settingsWaitServer(t)
		tr := settingsWaitTransport(2)
		defer closeIdle(tr)
		waiting := make(chan struct{}, 1)
		tr.h2.beforeSettingsWait = signalTo(waiting)
		url := "http://" + s.Addr()
		// Hang guards only: the outcomes are checked, not the times.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		doneA := goObserve(tr, newReq(t, "GET", url+"/a", nil).WithContext(ctx))
		awaitCh(t, "request A at the server", arrived)
		doneB := goObserve(tr, newReq(t, "GET", url+"/b", nil).WithContext(ctx))
		var oB observation
		gotB := false
		select {
		case <-waiting:
		case oB = <-doneB:
			gotB = true
		case <-ctx.Done():
			t.Fatal("request B neither waits for the SETTINGS nor is answered")
		}
		close(releaseA)
		oA := <-doneA
		if !gotB {
			oB = <-doneB
		}
		if oA.Err != "" || oA.Body != "ok" || oB.Err != "" || oB.Body != "ok" {
			t.Fatalf("A: %q %s; B: %q %s", oA.Body, oA.Err, oB.Body, oB.Err)
		}
		checkOneDial(t, s, tr, ": B dialled its own while the first connection waited for SETTINGS")
		stressPoolEmpty(t, tr)
	})
}
