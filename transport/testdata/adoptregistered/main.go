// Command adoptregistered is run by TestInstallRegisteredPrograms: it does
// what real programs do with http.DefaultTransport, with ferry installed
// (-adopt install) or not (-adopt none), and prints one line per outcome.
// Lines starting with "ferry " report ferry's Stats; every other line must
// be the same with and without ferry.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ferryhttp/ferry/transport"
)

func main() {
	adopt := flag.String("adopt", "install", "install | none")
	scenario := flag.String("scenario", "", "assert-clone | mutate | tls-clone-after-first-use | undo-then-https | tls-before-first-request | get-and-timeout")
	flag.Parse()

	// Servers are made before Install, as in a program whose servers and
	// clients share a process; none of them uses http.DefaultTransport.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		fmt.Fprintf(w, "%s %s", r.Proto, r.URL.Path)
	}))
	defer plain.Close()
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Proto, r.URL.Path)
	}))
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		fmt.Fprintf(w, "proxied %s", r.URL)
	}))
	defer proxy.Close()

	var ferry *transport.Transport
	undo := func() {}
	switch *adopt {
	case "install":
		undo = transport.Install()
		ferry = transport.Installed()
	case "none":
	default:
		fail("unknown -adopt %q", *adopt)
	}
	stats := func(when string) {
		if ferry != nil {
			r := ferry.Stats().Requests
			fmt.Printf("ferry %s h1=%d h2=%d\n", when, r.H1, r.H2)
		}
	}

	switch *scenario {
	case "assert-clone":
		std := http.DefaultTransport.(*http.Transport) // panics if it is not one
		get("default-client", http.DefaultClient, plain.URL+"/a")
		stats("after-default-client")
		// What libraries do: clone, then set TLS options on the clone's
		// config (non-nil after net/http's setup, with or without ferry).
		c := std.Clone()
		c.TLSClientConfig.InsecureSkipVerify = true
		get("clone-insecure", &http.Client{Transport: c}, tlsSrv.URL+"/b")
		c.CloseIdleConnections()
		stats("after-clone")
		fmt.Printf("default-transport-unchanged %v\n", http.DefaultTransport == http.RoundTripper(std))

	case "mutate":
		get("before-change", &http.Client{}, plain.URL+"/a")
		stats("before-change")
		std := http.DefaultTransport.(*http.Transport)
		// The program trusts its server's certificate from now on.
		pool := x509.NewCertPool()
		pool.AddCert(tlsSrv.Certificate())
		std.TLSClientConfig = &tls.Config{RootCAs: pool}
		get("https-after-tls-change", &http.Client{}, tlsSrv.URL+"/b")
		stats("after-tls-change")
		// And sends plain-http requests through its proxy.
		pu, _ := url.Parse(proxy.URL)
		std.Proxy = http.ProxyURL(pu)
		get("http-after-proxy-change", &http.Client{}, "http://origin.invalid/c")
		fmt.Printf("proxy-saw %d\n", proxied.Load())
		stats("after-proxy-change")

	case "tls-clone-after-first-use":
		get("before-change", &http.Client{}, plain.URL+"/a")
		stats("before-change")
		// What libraries do to add a root: a clone of the config in use,
		// which keeps the ALPN list net/http set at the first use.
		std := http.DefaultTransport.(*http.Transport)
		cfg := std.TLSClientConfig.Clone()
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AddCert(tlsSrv.Certificate())
		std.TLSClientConfig = cfg
		fmt.Printf("next-protos %q\n", cfg.NextProtos)
		get("https-after-tls-clone", &http.Client{}, tlsSrv.URL+"/b")
		stats("after-tls-clone")

	case "undo-then-https":
		pool := x509.NewCertPool()
		pool.AddCert(tlsSrv.Certificate())
		http.DefaultTransport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
		get("https-before-undo", &http.Client{}, tlsSrv.URL+"/b")
		stats("before-undo")
		undo()
		get("https-after-undo", &http.Client{}, tlsSrv.URL+"/c")
		stats("after-undo")

	case "tls-before-first-request":
		// The program configures the transport before its first request.
		pool := x509.NewCertPool()
		pool.AddCert(tlsSrv.Certificate())
		http.DefaultTransport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
		get("https-first-request", &http.Client{}, tlsSrv.URL+"/b")
		stats("after-https")

	case "get-and-timeout":
		resp, err := http.Get(plain.URL + "/a")
		report("http.Get", resp, err)
		stats("after-get")
		c := &http.Client{Timeout: 300 * time.Millisecond}
		resp, err = c.Get(plain.URL + "/slow")
		// The error's text is not printed: with any RoundTripper but
		// net/http's own, http.Client adds its "(Client.Timeout exceeded
		// ...)" suffix only if its timer fired before the transport
		// returned, which races with the request's context deadline.
		var ne net.Error
		fmt.Printf("client-timeout timeout=%v deadline-exceeded=%v url=%v\n",
			errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded),
			strings.Contains(fmt.Sprint(err), plain.URL+"/slow"))
		if err == nil {
			resp.Body.Close()
		}
		get("client-with-timeout", &http.Client{Timeout: 5 * time.Second}, plain.URL+"/d")
		stats("after-timeout-client")
		if ferry != nil {
			fmt.Printf("ferry idle-before-close-idle %d\n", ferry.Stats().Conns.IdleH1)
		}
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		if ferry != nil {
			fmt.Printf("ferry idle-after-close-idle %d\n", ferry.Stats().Conns.IdleH1)
		}

	default:
		fail("unknown -scenario %q", *scenario)
	}
}

// get sends a GET with c and prints its outcome.
func get(name string, c *http.Client, u string) {
	resp, err := c.Get(u)
	report(name, resp, err)
}

// report prints a response's status, protocol and body, or the error.
func report(name string, resp *http.Response, err error) {
	if err != nil {
		fmt.Printf("%s error %v\n", name, err)
		return
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s %d %s %q %v\n", name, resp.StatusCode, resp.Proto, b, err)
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(2)
}
