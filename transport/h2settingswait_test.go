package transport

import (
	"context"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestH2SecondStreamWaitsForSettingsUnderMaxConns: under MaxConnsPerHost a
// new HTTP/2 connection refuses a second stream until the server's
// SETTINGS are known (h2conn's OnStreamFree hook). That refusal does not
// mean the connection is full: a request that meets it with a slot free
// must wait for the SETTINGS and take a stream of that connection, as
// requests beyond the first do without a limit (README), not dial a
// connection net/http would not have dialled. Before, it dialled: with a
// server that answers nothing until 10 streams are open
// (TestChaos10H2GoAwayWithWaiters, MaxConnsPerHost 2) the second
// connection served every other request while the first waited for its
// SETTINGS probe, and its requests waited for the server for good.
//
// The server never acknowledges PING and holds request A, the first of its
// first connection, so only A's response proves the SETTINGS (the probe's
// own limit is an hour). B is sent while A is held; A is answered once B
// waits for the SETTINGS, or once B is answered on a connection of its
// own (the defect). Both must be answered on one connection that ferry
// dialled once; B found its stream in the pool and is no dial.
func TestH2SecondStreamWaitsForSettingsUnderMaxConns(t *testing.T) {
	chaosLeakCheck(t, func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		releaseA := make(chan struct{})
		s := testpeer.StartH2(t, testpeer.H2Script{
			Settings:  []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 10}},
			NoPingAck: true,
			OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
				if conn == 0 && stream == 0 {
					arrived <- struct{}{}
					<-releaseA // the connection's reading waits too
				}
				return testpeer.H2OK(fr, id)
			},
		})
		tr := From(&http.Transport{Protocols: protocolsOf("h2c"), MaxConnsPerHost: 2,
			HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
		defer closeIdle(tr)
		waiting := make(chan struct{}, 1)
		tr.h2.beforeSettingsWait = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
		url := "http://" + s.Addr()
		// Hang guards only: the outcomes are checked, not the times.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		doneA := make(chan observation, 1)
		go func() { doneA <- observe(tr, newReq(t, "GET", url+"/a", nil).WithContext(ctx)) }()
		awaitCh(t, "request A at the server", arrived)
		doneB := make(chan observation, 1)
		go func() { doneB <- observe(tr, newReq(t, "GET", url+"/b", nil).WithContext(ctx)) }()
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
		if conns, _ := s.Counts(); conns != 1 {
			t.Errorf("the server accepted %d connections, want 1: B dialled its own while the first connection waited for SETTINGS", conns)
		}
		if countStats {
			if d := tr.Stats().Conns.Dialled; d != 1 {
				t.Errorf("Stats.Conns.Dialled = %d, want 1 (B's stream came from the pool)", d)
			}
		}
		chaosPoolEmpty(t, tr)
	})
}
