package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/server"
)

// Wrap serves an existing http.Server over HTTP/1.1 and HTTP/2 on TCP and
// HTTP/3 on UDP, on one port, and advertises HTTP/3 with Alt-Svc.
func ExampleWrap() {
	cert, err := selfsigned.New() // a real service passes its cert files to ListenTLS
	if err != nil {
		log.Fatal(err)
	}
	srv := server.Wrap(&http.Server{
		Addr: "127.0.0.1:0",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "hello over "+r.Proto)
		}),
		TLSConfig: cert.ServerConfig(),
	})
	if err := srv.ListenTLS("", ""); err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	client := &http.Transport{TLSClientConfig: cert.ClientConfig(), ForceAttemptHTTP2: true}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+srv.Addr().String()+"/", nil)
	resp, err := client.RoundTrip(req)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	fmt.Println("advertises HTTP/3:", strings.HasPrefix(resp.Header.Get("Alt-Svc"), `h3=":`))

	client.CloseIdleConnections()
	if err := srv.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-served)
	// Output:
	// hello over HTTP/2.0
	// advertises HTTP/3: true
	// http: Server closed
}
