package transport

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// A connection's first stream, and resets and GOAWAYs aimed at it, side by
// side with net/http (compareImpls: each implementation against its own
// fresh loopback server). On Go 1.26 each fails if ferry's in-use marking
// spends stream 1 (internal/h2conn), or if ferry does not retry a
// PROTOCOL_ERROR reset as Go 1.26's net/http does.

// TestH2ProtocolErrorResetRetried: the server resets the first
// request's stream with PROTOCOL_ERROR. Go 1.26's net/http retries it
// (h2_bundle.go http2canRetryError, golang/go#47635) and succeeds on the
// second stream; Go 1.27 dropped the rule and returns the stream error.
// ferry follows the toolchain it is built with.
func TestH2ProtocolErrorResetRetried(t *testing.T) {
	compareImpls(t, func(t *testing.T, impl string) []any {
		s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
			if conn == 0 && stream == 0 {
				return fr.WriteRSTStream(id, http2.ErrCodeProtocol)
			}
			return testpeer.H2OK(fr, id)
		}})
		rt := implH2c(t, impl)
		resp, err := rt.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil))
		o := observeResponse(resp, err)
		conns, streams := s.Counts()
		return []any{o.Status, o.Body, h2ErrText(err), conns, streams}
	})
}

// TestH2FirstRequestStreamID: the first request on a new connection goes
// out on stream 1, the next on stream 3. Servers and proxies log it, and
// x/net's "first stream" rules key on it (TestH2GoAwayErrorOnFirstStream).
func TestH2FirstRequestStreamID(t *testing.T) {
	compareImpls(t, func(t *testing.T, impl string) []any {
		var mu sync.Mutex // guards ids
		var ids []uint32
		s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			return testpeer.H2OK(fr, id)
		}})
		rt := implH2c(t, impl)
		for i := 0; i < 2; i++ {
			if o := observe(rt, newReq(t, "GET", "http://"+s.Addr()+"/", nil)); o.Err != "" {
				t.Fatalf("%s: %s", impl, o.Err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return []any{fmt.Sprint(ids)}
	})
}

// TestH2GoAwayErrorOnFirstStream: the server answers the first request
// of every connection with GOAWAY(last stream 0, ENHANCE_YOUR_CALM). net/http
// fails the request at once ("Transport received GOAWAY from server
// ErrCode:ENHANCE_YOUR_CALM", one connection): x/net does not retry the
// first stream of a connection after a GOAWAY with an error code. (When
// ferry's first request went out on stream 3 it dialled again and again
// with backoff; the 10 s deadline bounds that.)
func TestH2GoAwayErrorOnFirstStream(t *testing.T) {
	compareImpls(t, func(t *testing.T, impl string) []any {
		s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
			return fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("slow down"))
		}})
		rt := implH2c(t, impl)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := rt.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
		conns, _ := s.Counts()
		return []any{h2ErrText(err), conns}
	})
}
