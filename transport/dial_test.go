package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// What a request sees of ferry's own dialing (DialContext
// nil) against net/http.Transport with its default net.Dialer, side by side
// over loopback.

// dialTransports returns net/http's Transport with the default dialer
// and ferry's New(), both without a proxy and with mod applied to each.
func dialTransports(mod func(std *http.Transport, f *Transport)) map[string]http.RoundTripper {
	std := &http.Transport{DialContext: (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext}
	f := New()
	f.Proxy = nil
	if mod != nil {
		mod(std, f)
	}
	return map[string]http.RoundTripper{"net/http": std, "ferry": f}
}

// silentTCPServer accepts connections and never writes, so a TLS client
// handshake on them can only end by its timeout or its context.
func silentTCPServer(t *testing.T) string {
	srv := startRawServer(t, func(c *rawConn) { io.Copy(io.Discard, c) })
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestDialTLSHandshakeTimeout: the handshake timeout is a net.Error
// with Timeout() and net/http's text, also in TLSHandshakeDone.
func TestDialTLSHandshakeTimeout(t *testing.T) {
	addr := silentTCPServer(t)
	rts := dialTransports(func(std *http.Transport, f *Transport) {
		std.TLSHandshakeTimeout = 50 * time.Millisecond
		f.TLSHandshakeTimeout = 50 * time.Millisecond
	})
	got := map[string]string{}
	for name, rt := range rts {
		var doneErr error
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // hang guard
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			TLSHandshakeDone: func(_ tls.ConnectionState, err error) { doneErr = err },
		})
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/", nil)
		resp, err := rt.RoundTrip(req)
		cancel()
		if resp != nil {
			resp.Body.Close()
			t.Fatalf("%s: got a response", name)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: err = %v (%T), want a net.Error with Timeout() that is not the context's", name, err, err)
		}
		if doneErr == nil || doneErr.Error() != err.Error() {
			t.Fatalf("%s: TLSHandshakeDone err %v, RoundTrip err %v", name, doneErr, err)
		}
		got[name] = err.Error()
		closeIdle(rt)
	}
	if got["ferry"] != got["net/http"] {
		t.Fatalf("error text: ferry %q, net/http %q", got["ferry"], got["net/http"])
	}
}

// dialHookLog records the DNS and connect hooks with their arguments.
type dialHookLog struct {
	mu sync.Mutex // guards ev
	ev []string
}

func (l *dialHookLog) add(s string) {
	l.mu.Lock()
	l.ev = append(l.ev, s)
	l.mu.Unlock()
}

func (l *dialHookLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ev)
}

func (l *dialHookLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.ev
	l.ev = nil
	return ev
}

func (l *dialHookLog) trace() *httptrace.ClientTrace {
	errText := func(err error) string {
		if err == nil {
			return "ok"
		}
		return err.Error()
	}
	return &httptrace.ClientTrace{
		DNSStart: func(i httptrace.DNSStartInfo) { l.add("DNSStart " + i.Host) },
		DNSDone: func(i httptrace.DNSDoneInfo) {
			l.add(fmt.Sprintf("DNSDone %v %s coalesced=%v", i.Addrs, errText(i.Err), i.Coalesced))
		},
		ConnectStart: func(network, addr string) { l.add("ConnectStart " + network + " " + addr) },
		ConnectDone: func(network, addr string, err error) {
			l.add("ConnectDone " + network + " " + addr + " " + errText(err))
		},
	}
}

// TestDialHooksAndErrors: through a loopback DNS server, the DNS and
// connect hooks (with their arguments) and the error of each request match
// net/http's default dialer: a name whose first address refuses falls to
// the next, unknown names, refused literals (IPv4, IPv6, port 0), and a
// second request on the idle connection fires no DNS or connect hook.
func TestDialHooksAndErrors(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	dns := dnstest.Start(t)
	dns.Set("two.dial.test", "::1", "127.0.0.1")
	dns.Set("only6.dial.test", "::1")
	dns.Set("empty.dial.test")
	resolver := dns.Resolver()
	cases := []struct {
		name string
		urls []string // requested in turn on one Transport
	}{
		{"first address refused, second serves; then idle reuse", []string{"http://two.dial.test:" + port + "/", "http://two.dial.test:" + port + "/"}},
		{"unknown name", []string{"http://nx.dial.test:" + port + "/"}},
		{"name without addresses", []string{"http://empty.dial.test:" + port + "/"}},
		{"only address refused", []string{"http://only6.dial.test:" + port + "/"}},
		{"IPv6 literal refused", []string{"http://[::1]:" + port + "/"}},
		{"port 0", []string{"http://127.0.0.1:0/"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]string{}
			rts := dialTransports(func(std *http.Transport, f *Transport) {
				std.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver}).DialContext
				f.Resolver = resolver
			})
			for name, rt := range rts {
				var hooks dialHookLog
				for _, u := range tc.urls {
					ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // hang guard
					req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, hooks.trace()), "GET", u, nil)
					resp, err := rt.RoundTrip(req)
					res := "error: "
					if err != nil {
						res += err.Error()
						var de *net.DNSError
						if errors.As(err, &de) {
							res += fmt.Sprintf(" (DNSError NotFound=%v Timeout=%v)", de.IsNotFound, de.IsTimeout)
						}
					} else {
						res = resp.Status
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					cancel()
					got[name] = append(got[name], hooks.take()...)
					got[name] = append(got[name], res)
				}
				closeIdle(rt)
			}
			if !slices.Equal(got["ferry"], got["net/http"]) {
				t.Fatalf("ferry:\n  %s\nnet/http:\n  %s", strings.Join(got["ferry"], "\n  "), strings.Join(got["net/http"], "\n  "))
			}
		})
	}
}

// TestDialConcurrentLookupsCoalesced: two requests that dial the same
// new name at once make one DNS query, and each sees its own DNSStart and
// a DNSDone with the answer and Coalesced set, as with net/http.
func TestDialConcurrentLookupsCoalesced(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	dns := dnstest.Start(t)
	resolver := dns.Resolver()
	rts := dialTransports(func(std *http.Transport, f *Transport) {
		std.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver}).DialContext
		f.Resolver = resolver
	})
	got := map[string][]string{}
	for _, name := range []string{"net/http", "ferry"} {
		rt := rts[name]
		host := strings.ReplaceAll(name, "/", "-") + ".co.dial.test"
		dns.Set(host, "127.0.0.1")
		dns.CloseGate()
		var logs [2]dialHookLog
		results := make(chan string, 2)
		started := make(chan struct{}, 2)
		for i := range logs {
			go func() {
				tr := logs[i].trace()
				dnsStart := tr.DNSStart
				tr.DNSStart = func(info httptrace.DNSStartInfo) { dnsStart(info); started <- struct{}{} }
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // hang guard
				defer cancel()
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, tr), "GET", "http://"+host+":"+port+"/", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					results <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				results <- resp.Status
			}()
		}
		<-started
		<-started
		dns.AwaitQueries(t, host, "A", 1)
		dns.OpenGate()
		for range logs {
			if r := <-results; r != "200 OK" {
				t.Fatalf("%s: %s", name, r)
			}
		}
		for i := range logs {
			// net/http may hand a request another request's idle
			// connection while its own dial still runs in the background:
			// wait (hang-guarded) for that dial's hooks.
			for deadline := time.Now().Add(10 * time.Second); logs[i].len() < 4 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			got[name] = append(got[name], strings.Join(logs[i].take(), " | "))
		}
		if q := dns.Count(host, "A"); q != 1 {
			t.Errorf("%s: %d A queries for two concurrent requests, want 1", name, q)
		}
		closeIdle(rt)
	}
	for _, name := range []string{"net/http", "ferry"} {
		for i, l := range got[name] {
			got[name][i] = strings.ReplaceAll(l, strings.ReplaceAll(name, "/", "-")+".", "NAME.")
		}
	}
	if !slices.Equal(got["ferry"], got["net/http"]) {
		t.Fatalf("ferry:\n  %s\nnet/http:\n  %s", strings.Join(got["ferry"], "\n  "), strings.Join(got["net/http"], "\n  "))
	}
}

// TestDialTLSErrors: TLS failures after ferry's own dial read as
// net/http's, in the error and in TLSHandshakeDone: an untrusted
// certificate, a server that closes at once, a server speaking plain HTTP.
func TestDialTLSErrors(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	untrusted := startHandlerServer(t, hello, true, cert)
	plain := startHandlerServer(t, hello, false, nil)
	closer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closerDone := make(chan struct{})
	go func() {
		defer close(closerDone)
		for {
			c, err := closer.Accept()
			if err != nil {
				return
			}
			// Read the ClientHello record, then end the stream cleanly, so
			// the client reads EOF (not a reset) at its first read.
			hdr := make([]byte, 5)
			if _, err := io.ReadFull(c, hdr); err == nil {
				io.CopyN(io.Discard, c, int64(hdr[3])<<8|int64(hdr[4]))
			}
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	t.Cleanup(func() { closer.Close(); <-closerDone })
	urls := map[string]string{
		"untrusted certificate":  untrusted.URL,
		"server ends the stream": "https://" + closer.Addr().String() + "/",
		"plain HTTP server":      "https://" + strings.TrimPrefix(plain.URL, "http://"),
	}
	for name, u := range urls {
		t.Run(name, func(t *testing.T) {
			got := map[string]string{}
			for rtName, rt := range dialTransports(nil) {
				var doneErr error
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // hang guard
				ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
					TLSHandshakeDone: func(_ tls.ConnectionState, err error) { doneErr = err },
				})
				req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
				resp, err := rt.RoundTrip(req)
				cancel()
				if resp != nil {
					resp.Body.Close()
				}
				if err == nil || doneErr == nil {
					t.Fatalf("%s: err %v, TLSHandshakeDone %v: want both to fail", rtName, err, doneErr)
				}
				got[rtName] = fmt.Sprintf("%v / TLSHandshakeDone: %v", err, doneErr)
				closeIdle(rt)
			}
			if got["ferry"] != got["net/http"] {
				t.Fatalf("ferry %q\nnet/http %q", got["ferry"], got["net/http"])
			}
		})
	}
}
