// Command adoptblank is run by TestInstall: ferry adopted by a blank
// import alone, then the requests and the type assertion real programs do.
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	_ "github.com/ferryhttp/ferry/install"
	"github.com/ferryhttp/ferry/transport"
)

func main() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println("http.Get error", err)
		os.Exit(1)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		fmt.Printf("bad body %q\n", b)
		os.Exit(1)
	}
	tr := transport.Installed()
	if tr == nil {
		fmt.Println("nothing installed")
		os.Exit(1)
	}
	std := http.DefaultTransport.(*http.Transport).Clone()
	std.CloseIdleConnections()
	fmt.Printf("ferry-requests %d\n", tr.Stats().Requests.Total())
}
