package transport

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// TestDialContextOutlivesDial: a caller's DialContext may tie its
// connection to the context it was given (some libraries' connections end
// with their context). net/http never cancels that context once the dial
// succeeded, so such a connection keeps working; ferry must not cancel it
// either. (A change that dialled under a context cancelled right after
// every dial broke this; review caught it.)
func TestDialContextOutlivesDial(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, func() { c.Close() })
		return c, nil
	}
	for _, rt := range []http.RoundTripper{&http.Transport{DialContext: dial}, &Transport{DialContext: dial}} {
		for i := 0; i < 2; i++ {
			if o := observe(rt, newReq(t, "GET", srv.URL, nil)); o.Status != 200 || o.Body == "" || o.BodyErr != "" {
				t.Fatalf("%T request %d: %+v", rt, i, o)
			}
		}
		closeIdle(rt)
	}
}
