package transport

import (
	"context"
	"io"
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
			req, err := http.NewRequest("GET", srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("%T request %d: %v", rt, i, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || len(body) == 0 {
				t.Fatalf("%T request %d: %d %q %v", rt, i, resp.StatusCode, body, err)
			}
		}
		closeIdle(rt)
	}
}
