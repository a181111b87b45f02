package transport

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// Servers that leave PINGs unanswered.

// TestH2UnconfirmedResetUnderMaxConns: a server allowing one stream stops
// answering PINGs once a request was cancelled (RST_STREAM with x/net's
// PING), so legacy x/net counts the reset against the limit for good and
// the connection stays full with no request on it. Under MaxConnsPerHost
// 1 the next request waited in ferry's pool until its context ended;
// net/http leaves the connection and dials another (200 on a second
// connection). Ferry now pings such a connection once a request finds it
// so, and gives it up when the PING goes unanswered for PingTimeout: 200
// on a second connection too. Without MaxConnsPerHost both dial at once.
func TestH2UnconfirmedResetUnderMaxConns(t *testing.T) {
	for _, maxConns := range []int{1, 0} {
		name := "max-conns-1"
		if maxConns == 0 {
			name = "no-max-conns"
		}
		t.Run(name, func(t *testing.T) {
			compareImpls(t, func(t *testing.T, impl string) []any {
				hung := make(chan struct{}, 1)
				reset := make(chan struct{}, 1)
				s := testpeer.StartH2(t, testpeer.H2Script{
					Settings:            []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 1}},
					MutePingsAfterReset: true,
					OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
						if conn == 0 && stream == 2 {
							hung <- struct{}{} // request A: never answered
							return nil
						}
						return testpeer.H2OK(fr, id)
					},
					OnReset: func(int, uint32, http2.ErrCode) {
						select {
						case reset <- struct{}{}:
						default:
						}
					},
				})
				rt := implClient(t, impl, &http.Transport{
					Protocols:       protocolsOf("h2c"),
					MaxConnsPerHost: maxConns,
					HTTP2:           &http.HTTP2Config{PingTimeout: 200 * time.Millisecond},
				})
				url := "http://" + s.Addr()
				if o := observe(rt, newReq(t, "GET", url+"/warm", nil)); o.Err != "" {
					t.Fatalf("%s: warm-up request: %s", impl, o.Err)
				}
				if o := observe(rt, newReq(t, "GET", url+"/warm2", nil)); o.Err != "" {
					t.Fatalf("%s: second warm-up request: %s", impl, o.Err)
				}
				ctxA, cancelA := context.WithCancel(context.Background())
				doneA := make(chan error, 1)
				go func() {
					_, err := rt.RoundTrip(newReq(t, "GET", url+"/a", nil).WithContext(ctxA))
					doneA <- err
				}()
				awaitCh(t, "request A at the server", hung)
				cancelA()
				<-doneA
				awaitCh(t, "request A's reset at the server", reset)
				// Hang guard only: the outcome is compared, not the time.
				ctxB, cancelB := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancelB()
				o := observe(rt, newReq(t, "GET", url+"/b", nil).WithContext(ctxB))
				conns, _ := s.Counts()
				return []any{o.Status, o.Body, o.Err, conns}
			})
		})
	}
}

// TestH2FirstRequestsWithoutPingAck: a server that answers requests but
// never acknowledges PING. A second request on the new connection while
// the first is in flight: net/http sends it at once; ferry waited for the
// ack of its SETTINGS probe until the request's context ended. It now goes
// out once the first response proves the SETTINGS were processed (the
// probe's own time limit is set out of reach, so only that can release it).
func TestH2FirstRequestsWithoutPingAck(t *testing.T) {
	compareImpls(t, func(t *testing.T, impl string) []any {
		arrived := make(chan struct{}, 1)
		releaseA := make(chan struct{})
		s := testpeer.StartH2(t, testpeer.H2Script{
			NoPingAck: true,
			OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
				if stream == 0 {
					arrived <- struct{}{}
					<-releaseA // the server's reading waits too
				}
				return testpeer.H2OK(fr, id)
			},
		})
		// ferry's SETTINGS probe gives up after PingTimeout; an hour, out of
		// reach of B's hang guard, leaves only A's response to let B out.
		rt := implClient(t, impl, &http.Transport{Protocols: protocolsOf("h2c"),
			HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
		url := "http://" + s.Addr()
		doneA := make(chan observation, 1)
		go func() { doneA <- observe(rt, newReq(t, "GET", url+"/a", nil)) }()
		awaitCh(t, "request A at the server", arrived)
		// A is answered a moment after B started (whichever comes first,
		// B must get its answer).
		release := time.AfterFunc(100*time.Millisecond, func() { close(releaseA) })
		defer release.Stop()
		ctxB, cancelB := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancelB()
		oB := observe(rt, newReq(t, "GET", url+"/b", nil).WithContext(ctxB))
		oA := <-doneA
		// Connections are not compared: whether B finds A's connection in
		// the pool or dials its own depends on timing in net/http (seen
		// both ways under load); what matters is that both are answered.
		_, streams := s.Counts()
		return []any{oA.Status, oA.Err, oB.Status, oB.Err, streams}
	})
}

// awaitCh waits for ch, failing the test after a generous bound (it
// asserts that an event happens, not how fast).
func awaitCh(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(rowTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}
