package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
)

// TestFileBodyEarlyAnswerClose: the server answers a file body's
// head with a final response and closes the connection while sendfile is
// sending the body; the write fails on the connection's side, which is
// not the caller's body failing, so the answer is what RoundTrip returns,
// as with a body copied through user space.
func TestFileBodyEarlyAnswerClose(t *testing.T) {
	big := sparseFile(t, 64<<20)
	for _, framing := range []string{"file", "NopCloser(file)", "ledger"} {
		t.Run(framing, func(t *testing.T) {
			srv := startRawServer(t, func(c *rawConn) {
				if _, err := http.ReadRequest(c.br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbig!")
			})
			rt := &Transport{}
			defer rt.CloseIdleConnections()
			f, err := os.Open(big)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var body io.Reader = f
			switch framing {
			case "NopCloser(file)":
				body = io.NopCloser(f)
			case "ledger":
				body = io.NopCloser(ledgerBody{f})
			}
			ctx, cancel := context.WithTimeout(context.Background(), fileBodyHang)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "PUT", srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 64 << 20
			resp, err := rt.RoundTrip(req)
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatal("hung until the hang guard")
			}
			got := ""
			if err != nil {
				got = "error: " + err.Error()
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = fmt.Sprintf("%d %q", resp.StatusCode, b)
			}
			if want := `413 "big!"`; got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}
