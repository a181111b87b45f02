package transport

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// TestDialContextOutlivesDial: a caller's DialContext (or DialTLSContext)
// may tie its connection to the context it was given (some libraries'
// connections end with their context). net/http dials under a context that
// keeps the request's values but is never cancelled once the dial
// succeeded, even when the request's own context ends afterwards (the
// common `ctx, cancel := context.WithTimeout(...); defer cancel()`), so such
// a connection stays in the pool and serves the next request; ferry must
// do the same. (A change that dialled under a context cancelled right
// after every dial broke the first row; ferry dialling under the request's
// own context broke the others: the pooled connection closed with the
// first request's context, and the server saw a second one.)
func TestDialContextOutlivesDial(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tieToCtx := func(ctx context.Context, c net.Conn) {
		context.AfterFunc(ctx, func() { c.Close() })
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tieToCtx(ctx, c)
		return c, nil
	}
	dialTLS := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&tls.Dialer{Config: cert.ClientConfig()}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tieToCtx(ctx, c)
		return c, nil
	}
	for _, c := range []struct {
		name string
		tls  bool
		// cancelAfter cancels the first request's context once its
		// response body was read and closed.
		cancelAfter bool
	}{
		{name: "DialContext/background"},
		{name: "DialContext/cancelled-after-response", cancelAfter: true},
		{name: "DialTLSContext/cancelled-after-response", tls: true, cancelAfter: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			type result struct {
				Obs   []observation
				Conns int
			}
			var res [2]result
			for i, impl := range []string{"nethttp", "ferry"} {
				srv := startHandlerServer(t, hello, c.tls, cert)
				std := &http.Transport{DialContext: dial}
				if c.tls {
					std = &http.Transport{DialTLSContext: dialTLS}
				}
				var rt http.RoundTripper = std
				if impl == "ferry" {
					rt = From(std)
				}
				for n := 0; n < 2; n++ {
					req := newReq(t, "GET", srv.URL, nil)
					cancel := func() {}
					if c.cancelAfter {
						var ctx context.Context
						ctx, cancel = context.WithCancel(context.Background())
						req = req.WithContext(ctx)
					}
					o := observe(rt, req) // reads and closes the body
					cancel()
					res[i].Obs = append(res[i].Obs, o)
					if o.Status != 200 || o.Body == "" || o.BodyErr != "" {
						t.Errorf("%s request %d: %+v", impl, n, o)
					}
				}
				closeIdle(rt)
				res[i].Conns = srv.connCount()
			}
			if res[0].Conns != 1 || res[1].Conns != 1 {
				t.Errorf("connections: net/http %d, ferry %d, want 1 each", res[0].Conns, res[1].Conns)
			}
			for n := range res[0].Obs {
				if res[0].Obs[n].Err != res[1].Obs[n].Err || res[0].Obs[n].Status != res[1].Obs[n].Status {
					t.Errorf("request %d: net/http %+v, ferry %+v", n, res[0].Obs[n], res[1].Obs[n])
				}
			}
		})
	}
}
