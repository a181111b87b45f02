package transport_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ferryhttp/ferry/transport"
)

// helloServer starts a loopback server answering "hello".
func helloServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
}

// getBody sends a GET with client and returns the protocol and body.
func getBody(client *http.Client, url string) (string, string) {
	resp, err := client.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	return resp.Proto, string(b)
}

// New returns a Transport with http.DefaultTransport's settings; use it
// wherever an http.RoundTripper goes.
func ExampleNew() {
	srv := helloServer()
	defer srv.Close()

	tr := transport.New()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	proto, body := getBody(client, srv.URL)
	fmt.Println(proto, body)
	// Output: HTTP/1.1 hello
}

// From carries over every setting of an http.Transport a program already
// configured.
func ExampleFrom() {
	std := &http.Transport{
		MaxIdleConnsPerHost:   16,
		ResponseHeaderTimeout: 5 * time.Second,
		DisableCompression:    true,
	}
	tr := transport.From(std)
	client := &http.Client{Transport: tr}
	_ = client

	fmt.Println(tr.MaxIdleConnsPerHost, tr.ResponseHeaderTimeout, tr.DisableCompression)
	// Output: 16 5s true
}

// Install sends http.DefaultTransport's requests (http.Get, every client
// with a nil Transport) through ferry and leaves it an *http.Transport, so
// code asserting its type keeps working. (Not run as a test: Install
// registers on http.DefaultTransport for the rest of the process; the
// package's tests run it in child processes.)
func ExampleInstall() {
	undo := transport.Install() // usually the first line of main
	defer undo()

	srv := helloServer()
	defer srv.Close()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	_, stillStd := http.DefaultTransport.(*http.Transport)
	fmt.Println("DefaultTransport is *http.Transport:", stillStd)
	fmt.Println("requests through ferry:", transport.Installed().Stats().Requests.H1)
	// Prints:
	// DefaultTransport is *http.Transport: true
	// requests through ferry: 1
}

// WithSocketOptions sets socket options for the requests of one context,
// on whichever connection serves them; a reused connection whose options
// already have those values costs no syscall.
func ExampleWithSocketOptions() {
	srv := helloServer()
	defer srv.Close()
	tr := transport.New()
	defer tr.CloseIdleConnections()

	ctx := transport.WithSocketOptions(context.Background(),
		transport.TOS(0x10), // low delay
		transport.TCPNoDelay(true),
	)
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	if err != nil {
		log.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		log.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// Stats is a snapshot a service can export (see StatsVar for expvar).
func ExampleTransport_Stats() {
	srv := helloServer()
	defer srv.Close()
	tr := transport.New()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for i := 0; i < 3; i++ {
		getBody(client, srv.URL)
	}

	st := tr.Stats()
	fmt.Println("HTTP/1.1 responses:", st.Requests.H1)
	fmt.Println("connections dialled:", st.Conns.Dialled)
	fmt.Println("idle connections reused:", st.Pool.Hits)
	// Output:
	// HTTP/1.1 responses: 3
	// connections dialled: 1
	// idle connections reused: 2
}
