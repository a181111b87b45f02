package proxydial

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzConnectReply feeds arbitrary proxy replies to a CONNECT: Tunnel
// must return a connection or an error, never panic or hang, and no error
// may carry the proxy credentials.
func FuzzConnectReply(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01"))
	f.Add([]byte("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 503\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
	f.Add([]byte("garbage"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, reply []byte) {
		cfg := &Config{
			ConnectTimeout:         time.Second,
			MaxResponseHeaderBytes: 4096,
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				client, server := net.Pipe()
				go func() {
					defer server.Close()
					if _, err := readHead(server); err != nil {
						return
					}
					server.Write(reply)
				}()
				return client, nil
			},
		}
		conn, err := Tunnel(context.Background(), proxyURL("http", "proxy.invalid:3128", true), "127.0.0.1:9", cfg)
		if err != nil {
			if strings.Contains(err.Error(), testPassword) || strings.Contains(err.Error(), testUser) {
				t.Fatalf("error leaks credentials: %v", err)
			}
			return
		}
		io.Copy(io.Discard, conn) // drains early bytes until the pipe closes
		conn.Close()
	})
}
