package install

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/ferryhttp/ferry/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestImported: importing the package routed http.DefaultTransport's
// requests to ferry (http.Get and a client with a nil Transport), left it
// an *http.Transport whose Clone is plain net/http, and left
// http.DefaultClient alone.
func TestImported(t *testing.T) {
	tr := transport.Installed()
	if tr == nil || http.DefaultClient.Transport != nil {
		t.Fatalf("DefaultClient.Transport is %T, Installed() %p", http.DefaultClient.Transport, tr)
	}
	defer tr.CloseIdleConnections()
	std := http.DefaultTransport.(*http.Transport).Clone() // must not panic
	defer std.CloseIdleConnections()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	get := func(c *http.Client) {
		t.Helper()
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "ok" {
			t.Fatalf("body %q, %v", b, err)
		}
	}
	before := tr.Stats().Requests.H1
	get(http.DefaultClient)
	get(&http.Client{})
	if got := tr.Stats().Requests.H1 - before; got != 2 {
		t.Fatalf("ferry counted %d requests for http.Get and a nil-Transport client, want 2", got)
	}
	get(&http.Client{Transport: std})
	if got := tr.Stats().Requests.H1 - before; got != 2 {
		t.Fatalf("ferry counted %d requests after one on a Clone of http.DefaultTransport, want 2", got)
	}
}
