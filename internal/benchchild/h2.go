package benchchild

import (
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// ServeHTTP2 serves h with a net/http server speaking HTTP/2 over TLS
// (ALPN "h2" only, a throwaway certificate for 127.0.0.1) on a loopback
// port, announced as Serve does; it does not return. The server's error
// log is discarded: clients that go away are no news in a benchmark.
func ServeHTTP2(h http.Handler) {
	srv, ln := tlsServer(h)
	srv.TLSConfig.NextProtos = []string{"h2"}
	Announce(ln)
	srv.ServeTLS(ln, "", "")
	os.Exit(0)
}

// tlsServer returns an http.Server for h with a throwaway certificate for
// 127.0.0.1 and its error log discarded, and a TCP listener on a loopback
// port; a child that cannot have them fails (Fail).
func tlsServer(h http.Handler) (*http.Server, net.Listener) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		Fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		Fail(err)
	}
	return &http.Server{Handler: h, TLSConfig: cert.ServerConfig(), ErrorLog: log.New(io.Discard, "", 0)}, ln
}

// ServeH2C serves h with a net/http server speaking cleartext HTTP/2 with
// prior knowledge only (Protocols: unencrypted HTTP/2) on a loopback
// port, announced as Serve does; it does not return.
func ServeH2C(h http.Handler) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		Fail(err)
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p, ErrorLog: log.New(io.Discard, "", 0)}
	Announce(ln)
	srv.Serve(ln)
	os.Exit(0)
}
