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

// TestImported: importing the package installed ferry as
// http.DefaultClient's transport, left http.DefaultTransport an
// *http.Transport, and http.Get goes through ferry.
func TestImported(t *testing.T) {
	tr := transport.Installed()
	if tr == nil || http.DefaultClient.Transport != http.RoundTripper(tr) {
		t.Fatalf("DefaultClient.Transport is %T, Installed() %v", http.DefaultClient.Transport, tr)
	}
	defer tr.CloseIdleConnections()
	std := http.DefaultTransport.(*http.Transport).Clone() // must not panic
	std.CloseIdleConnections()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	before := tr.Stats().Requests.H1
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "ok" {
		t.Fatalf("body %q, %v", b, err)
	}
	if got := tr.Stats().Requests.H1 - before; got != 1 {
		t.Fatalf("ferry counted %d requests for one http.Get, want 1", got)
	}
}
