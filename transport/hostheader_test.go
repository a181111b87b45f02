package transport

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostSeenServer accepts connections on loopback and records, under the
// request's X-Request-Id header, the request target of a CONNECT and the Host
// line as they came on the wire, before it answers.
type hostSeenServer struct {
	ln net.Listener
	mu sync.Mutex // guards seen
	// seen: what each request carried, by its X-Request-Id value
	seen map[string]string
}

func startHostSeenServer(t *testing.T) *hostSeenServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &hostSeenServer{ln: ln, seen: map[string]string{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				got, id := "", ""
				for first := true; ; first = false {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
					if first {
						if f := strings.Fields(line); len(f) == 3 && f[0] == "CONNECT" {
							got = "target " + f[1] + "; "
						}
						continue
					}
					k, v, _ := strings.Cut(line, ":")
					v = strings.TrimSuffix(strings.TrimPrefix(v, " "), "\r\n")
					switch {
					case strings.EqualFold(k, "Host"):
						got += "Host " + v
					case k == "X-Request-Id":
						id = v
					}
				}
				s.mu.Lock()
				s.seen[id] = got
				s.mu.Unlock()
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

// TestHostHeaderMatchesNetHTTP: for GET and CONNECT (whose request target is the
// host), URL hosts (upper case, ports, an empty port, IPv6 with and without
// a zone, IDNs, bytes a Host header may not carry) and req.Host overrides,
// ferry sends the Host header (and CONNECT target) net/http sends, or fails
// where net/http fails. Every connection is dialled to the loopback
// server, whatever the URL's host.
func TestHostHeaderMatchesNetHTTP(t *testing.T) {
	s := startHostSeenServer(t)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", s.ln.Addr().String())
	}
	std := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	defer std.CloseIdleConnections()
	fer := &Transport{DialContext: dial, DisableKeepAlives: true}
	defer fer.CloseIdleConnections()
	urlHosts := []string{
		"example.com", "Example.COM", "example.com:8080", "EXAMPLE.com:", "127.0.0.1:80",
		"[::1]", "[::1]:8080", "[fe80::1%25eth0]:80", "[FE80::1%25Eth0]", "bücher.example",
		"Bücher.example:81", "host_name", "a.b-c_d:1",
	}
	overrides := []string{
		"", "Override.Example", "override:1", "[::1]:9", "[fe80::1%eth0]:1", "[fe80::1%25eth0]",
		"bücher.example", "a b", "a/b", "a@b", "x:", ":80", "a%b", "\x80", "_:-", "[]",
	}
	n := 0
	run := func(rt http.RoundTripper, method string, u *url.URL, host string) (string, error) {
		n++
		id := strconv.Itoa(n)
		req := &http.Request{Method: method, URL: u, Host: host, Header: http.Header{"X-Request-Id": {id}}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := rt.RoundTrip(req.WithContext(ctx))
		if err == nil {
			resp.Body.Close()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		got, ok := s.seen[id]
		if !ok {
			got = "(not sent)"
		}
		return got, err
	}
	for _, method := range []string{"GET", "CONNECT"} {
		for _, uh := range urlHosts {
			for _, oh := range overrides {
				u := &url.URL{Scheme: "http", Host: uh, Path: "/"}
				if method == "CONNECT" {
					u.Path = "" // the request target is the host
				}
				want, wantErr := run(std, method, u, oh)
				got, err := run(fer, method, u, oh)
				if (err == nil) != (wantErr == nil) || got != want {
					t.Errorf("%s, URL host %q, req.Host %q: ferry sent %q (%v), net/http %q (%v)",
						method, uh, oh, got, err, want, wantErr)
				}
			}
		}
	}
}
