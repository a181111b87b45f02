package transport

import (
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// TestH1UpgradeCloseWrite: the body of a 101 Switching Protocols
// response can half-close the connection, as net/http's can (tunnels and
// Docker-style hijacked streams signal the end of their input this way):
// the server reads EOF and still answers.
func TestH1UpgradeCloseWrite(t *testing.T) {
	var got [2][]any
	for i, rt := range []http.RoundTripper{settings{}.nethttp(nil), settings{}.ferry(nil)} {
		srv := startRawServer(t, func(c *rawConn) {
			c.readRequest()
			// A hang guard, no timing assertion: a CloseWrite that does
			// nothing fails the comparison instead of hanging the test.
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			in, err := io.ReadAll(c.br) // until the client's CloseWrite
			fmt.Fprintf(c, "got %q %v", in, err)
		})
		req := newReq(t, "GET", srv.URL, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		cw, ok := resp.Body.(interface{ CloseWrite() error })
		if !ok {
			got[i] = []any{fmt.Sprintf("%T has no CloseWrite", resp.Body)}
			resp.Body.Close()
			continue
		}
		resp.Body.(io.Writer).Write([]byte("ping"))
		cwErr := cw.CloseWrite()
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		got[i] = []any{cwErr, string(answer), err}
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("net/http: %v\nferry:    %v", got[0], got[1])
	}
}
