package transport

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFileBodyUnreadableNoHang: a file body sendfile cannot read
// (opened write-only: sendfile fails with EBADF before sending a byte)
// to a server that waits for the body. net/http returns sendfile's error
// at once (every error of its body copy is the body's). After 826fd4b
// ferry took any sendfile error for the connection's, and a writer error
// on the connection's side does not end the exchange: the socket was
// fine, the server waited for the body, and RoundTrip waited for an
// answer until the caller's context ended. copyFileBody now returns an
// error of the sendfile call as the body's, as net/http does.
func TestFileBodyUnreadableNoHang(t *testing.T) {
	path := filepath.Join(t.TempDir(), "write-only")
	if err := os.WriteFile(path, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, impl := range []string{"nethttp", "ferry"} {
		t.Run(impl, func(t *testing.T) {
			srv := startRawServer(t, hashingScript)
			rt := zeroClient(impl)
			defer closeIdle(rt)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ctx, cancel := context.WithTimeout(context.Background(), fileBodyHang)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "PUT", srv.URL, f)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 5
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("RoundTrip succeeded with an unreadable body")
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("RoundTrip waited until the hang guard: %v", err)
			}
			if !errors.Is(err, syscall.EBADF) {
				t.Errorf("error %v, want the file's EBADF", err)
			}
		})
	}
}
