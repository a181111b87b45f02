package h2conn

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkH2RoundTrip compares one GET through a Conn (ferryconn) with the
// same GET through net/http.Transport with ForceAttemptHTTP2 (nethttp), on
// the same TLS loopback server, serially and from parallel goroutines over
// one connection. Every response is checked.
func BenchmarkH2RoundTrip(b *testing.B) {
	const want = "pong"
	s := startServer(b, true, &http.HTTP2Config{MaxConcurrentStreams: 1000}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, want)
	}))
	url := s.url("/ping")
	// check uses b.Error, not b.Fatal: it also runs on RunParallel's
	// goroutines.
	check := func(b *testing.B, resp *http.Response, err error, buf []byte) {
		if err != nil {
			b.Error(err)
			return
		}
		n, _ := io.ReadFull(resp.Body, buf[:len(want)])
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 || string(buf[:n]) != want {
			b.Errorf("bad response %d %s %q", resp.StatusCode, resp.Proto, buf[:n])
		}
	}
	type client struct {
		name string
		rt   func(req *http.Request) (*http.Response, error)
		stop func()
	}
	newFerry := func(b *testing.B) client {
		c := newConn(b, s, Config{})
		return client{"ferryconn", func(req *http.Request) (*http.Response, error) {
			if !c.ReserveStream() {
				return nil, errNoSlot
			}
			return c.RoundTrip(req)
		}, func() { c.Close() }}
	}
	newNetHTTP := func(b *testing.B) client {
		cfg := testCert(b).ClientConfig()
		tr := &http.Transport{
			TLSClientConfig:   cfg,
			ForceAttemptHTTP2: true,
			DialContext:       (&net.Dialer{}).DialContext,
		}
		return client{"nethttp", tr.RoundTrip, tr.CloseIdleConnections}
	}
	for _, mk := range []func(*testing.B) client{newFerry, newNetHTTP} {
		cl := mk(b)
		b.Run(cl.name, func(b *testing.B) {
			// Warm: the connection is dialled outside the timed loops.
			req0, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
			resp, err := cl.rt(req0)
			check(b, resp, err, make([]byte, 8))
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				buf := make([]byte, 8)
				for b.Loop() {
					req, _ := http.NewRequest("GET", url, nil)
					resp, err := cl.rt(req)
					check(b, resp, err, buf)
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					buf := make([]byte, 8)
					for pb.Next() {
						req, _ := http.NewRequest("GET", url, nil)
						resp, err := cl.rt(req)
						check(b, resp, err, buf)
					}
				})
			})
		})
		cl.stop()
	}
}
