package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// silentH2Server accepts connections (TLS offering only ALPN "h2" when
// cert is set, else cleartext for prior-knowledge h2c), reads the client
// preface and then sends nothing, SETTINGS included, until the test ends:
// every wait a client makes for the server's SETTINGS lasts as long as
// the client lets it.
func silentH2Server(t *testing.T, cert *selfsigned.Cert) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cert != nil {
		cfg := cert.ServerConfig()
		cfg.NextProtos = []string{"h2"}
		ln = tls.NewListener(ln, cfg)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				preface := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(c, preface); err != nil {
					return
				}
				// Read and drop the client's frames (its SETTINGS, the
				// requests, PINGs) without ever answering.
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestH2ResponseHeaderTimeoutWithoutSettings: against a server that never
// sends its SETTINGS, ten concurrent GETs with ResponseHeaderTimeout 2 s
// must all end with a timeout error within a few seconds, as with
// net/http, which sends every request on the new connection at once
// (assuming the default stream limit) and times each out 2 s after it was
// written. ferry holds the requests beyond the first until the SETTINGS
// are known (h2conn's provisional slots, or, with MaxConnsPerHost, the
// pool and the dial leader's AwaitPeerSettings): those waits must end at
// the request's ResponseHeaderTimeout too, not at the SETTINGS probe's
// PingTimeout (15 s by default, left so here). Before, nine of the ten
// ended at 17 s.
func TestH2ResponseHeaderTimeoutWithoutSettings(t *testing.T) {
	cert, err := selfsigned.New()
	if err != nil {
		t.Fatal(err)
	}
	const (
		n     = 10
		rht   = 2 * time.Second
		bound = 6 * time.Second
	)
	for _, tlsOn := range []bool{false, true} {
		for _, maxConns := range []int{0, 1, 3} {
			for _, client := range []string{"net/http", "ferry"} {
				name := fmt.Sprintf("tls=%v/MaxConnsPerHost=%d/%s", tlsOn, maxConns, client)
				t.Run(name, func(t *testing.T) {
					t.Parallel() // each mostly waits for its timeout
					var addr, url string
					ht := &http.Transport{ResponseHeaderTimeout: rht, MaxConnsPerHost: maxConns}
					if tlsOn {
						addr = silentH2Server(t, cert)
						url = "https://" + addr + "/"
						ht.TLSClientConfig = cert.ClientConfig()
						ht.ForceAttemptHTTP2 = true
					} else {
						addr = silentH2Server(t, nil)
						url = "http://" + addr + "/"
						ht.Protocols = protocolsOf("h2c")
					}
					var rt http.RoundTripper = ht
					if client == "ferry" {
						rt = From(ht)
					}
					defer closeIdle(rt)
					var wg sync.WaitGroup
					errs := make([]error, n)
					took := make([]time.Duration, n)
					start := time.Now()
					for i := range n {
						wg.Add(1)
						go func() {
							defer wg.Done()
							resp, err := rt.RoundTrip(newReq(t, "GET", url, nil))
							if err == nil {
								resp.Body.Close()
							}
							errs[i], took[i] = err, time.Since(start)
						}()
					}
					wg.Wait()
					for i := range n {
						var ne net.Error
						switch {
						case errs[i] == nil:
							t.Errorf("request %d: a response from a server that sends nothing", i)
						case !errors.As(errs[i], &ne) || !ne.Timeout():
							t.Errorf("request %d: error %v (%T), want a net.Error with Timeout() true", i, errs[i], errs[i])
						}
						if took[i] > bound {
							t.Errorf("request %d ended after %v, want under %v (ResponseHeaderTimeout %v): %v", i, took[i].Round(time.Millisecond), bound, rht, errs[i])
						}
					}
					t.Logf("first error: %v; slowest %v", errs[0], slowest(took).Round(time.Millisecond))
				})
			}
		}
	}
}

func slowest(d []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m
}
