// Command adopt is run by TestInstall: it adopts ferry the way -mode says,
// sends requests the ways real programs do, and prints what went where.
// The last thing it does is the type assertion libraries do on
// http.DefaultTransport, unguarded, so a panic there fails the process as
// it would fail a real program.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/ferryhttp/ferry/transport"
)

func main() {
	mode := flag.String("mode", "install", "install | default-transport | none")
	undo := flag.Bool("undo", false, "undo the adoption before the final requests")
	flag.Parse()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	var undoFn func()
	switch *mode {
	case "install":
		undoFn = transport.Install()
	case "default-transport":
		undoFn = transport.InstallDefaultTransport()
	case "none":
		undoFn = func() {}
	default:
		fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
		os.Exit(2)
	}
	tr := transport.Installed()
	if tr != nil {
		fmt.Printf("dialcontext-dropped %v\n", tr.DialContext == nil)
	}
	if *undo {
		undoFn()
		fmt.Printf("installed-after-undo %v\n", transport.Installed() != nil)
	}

	get("http.Get", func() (*http.Response, error) { return http.Get(srv.URL) })
	get("client-nil-transport", func() (*http.Response, error) { return (&http.Client{}).Get(srv.URL) })
	if tr != nil {
		fmt.Printf("ferry-requests %d\n", tr.Stats().Requests.Total())
	}

	// What many libraries do; a panic here ends the process with status 2.
	std := http.DefaultTransport.(*http.Transport).Clone()
	defer std.CloseIdleConnections()
	get("cloned-default-transport", func() (*http.Response, error) {
		return (&http.Client{Transport: std}).Get(srv.URL)
	})
	if tr != nil {
		fmt.Printf("ferry-requests-final %d\n", tr.Stats().Requests.Total())
	}
}

// get runs one request, checks it and prints its outcome.
func get(name string, do func() (*http.Response, error)) {
	resp, err := do()
	if err != nil {
		fmt.Printf("%s error %v\n", name, err)
		os.Exit(1)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "ok" || resp.StatusCode != 200 {
		fmt.Printf("%s bad response %d %q %v\n", name, resp.StatusCode, b, err)
		os.Exit(1)
	}
	fmt.Printf("%s ok\n", name)
}
