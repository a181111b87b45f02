package benchchild

import (
	"net"
	"net/http"
	"os"

	"github.com/ferryhttp/ferry/server"
)

// ServeHTTP3 serves h with ferry's server.Wrap on a loopback port:
// HTTP/1.1 and HTTP/2 over TLS on TCP, HTTP/3 on UDP on the same port,
// advertised by Alt-Svc (a throwaway certificate for 127.0.0.1). It
// announces the TCP address as Serve does and does not return. The
// server's error log is discarded, as ServeHTTP2's is.
func ServeHTTP3(h http.Handler) {
	hs, ln := tlsServer(h)
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		Fail(err)
	}
	Announce(ln)
	server.Wrap(hs).ServeTLS(ln, pc, "", "")
	os.Exit(0)
}
