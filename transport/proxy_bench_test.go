package transport

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
)

// okServer answers every request on every connection with a fixed 200,
// whether the request line is in absolute form (as a forwarding proxy sees
// it) or not, so the benchmark measures the client side.
func okServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
						return
					}
				}
			}()
		}
	}()
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// BenchmarkProxyForward: a GET for an http target sent to a forwarding
// proxy (absolute form, Proxy-Authorization from the URL) against the same
// GET sent directly, for ferry and net/http.
func BenchmarkProxyForward(b *testing.B) {
	addr := okServer(b)
	proxyURL := &url.URL{Scheme: "http", Host: addr, User: url.UserPassword(proxyUser, proxySecret)}
	for _, route := range []string{"direct", "via-proxy"} {
		for _, impl := range []string{"ferry", "nethttp"} {
			b.Run(route+"/"+impl, func(b *testing.B) {
				target := "http://" + addr + "/x"
				var proxy func(*http.Request) (*url.URL, error)
				if route == "via-proxy" {
					target = "http://origin.test/x"
					proxy = http.ProxyURL(proxyURL)
				}
				var rt http.RoundTripper = &Transport{Proxy: proxy}
				if impl == "nethttp" {
					rt = &http.Transport{Proxy: proxy}
				}
				defer closeIdle(rt)
				req, _ := http.NewRequest("GET", target, nil)
				buf := make([]byte, 8)
				b.ReportAllocs()
				for b.Loop() {
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					n := 0
					for err == nil && n < len(buf) {
						var m int
						m, err = resp.Body.Read(buf[n:])
						n += m
					}
					resp.Body.Close()
					if err != io.EOF || resp.StatusCode != 200 || string(buf[:n]) != "ok" {
						b.Fatalf("%d %q", resp.StatusCode, buf[:n])
					}
				}
			})
		}
	}
}
