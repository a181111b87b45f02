package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
)

// Interop with a real, independent HTTP/2 server: nginx over TLS with a
// generated certificate and configuration in a temporary directory. Skipped
// when nginx is not installed, except under CI=true where that fails.

const nginxConf = `worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr warn;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    client_max_body_size 16m;
    client_body_buffer_size 16m;
    http2_max_concurrent_streams 128;
    server {
        listen 127.0.0.1:%[2]d ssl http2;
        ssl_certificate %[3]s;
        ssl_certificate_key %[4]s;
        location = /hello { add_header X-Proto $server_protocol; return 200 "hello from nginx\n"; }
        location = /echo-len {
            add_header X-Body-Len $content_length;
            return 200 "got $content_length\n";
        }
        location = /echo { proxy_pass http://%[5]s; proxy_http_version 1.1; }
        location = /trailers {
            add_trailer X-Interop-Trailer yes;
            return 200 "trailers from nginx\n";
        }
    }
}
`

// startNginx runs nginx in the foreground on a free loopback port and
// returns its https base URL; it is stopped when the test ends. It
// proxies /echo to backend ("host:port", HTTP/1.1).
func startNginx(t *testing.T, cert *selfsigned.Cert, backend string) string {
	bin := testpeer.Binary(t, "nginx", "nginx")
	dir := t.TempDir()
	certFile, keyFile, err := cert.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	port := testpeer.FreePort(t)
	conf := fmt.Sprintf(nginxConf, dir, port, certFile, keyFile, backend)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	testpeer.StartDaemon(t, addr, bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	return "https://" + addr
}

func TestH2NginxInterop(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	base := startNginx(t, cert, startH2InteropBackend(t))
	tr := From(h2BaseClient(cert))
	defer tr.CloseIdleConnections()

	var mu sync.Mutex // guards conns
	conns := map[net.Conn]bool{}
	traceCtx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			mu.Lock()
			conns[i.Conn] = true
			mu.Unlock()
		},
	})

	t.Run("GET", func(t *testing.T) {
		resp, err := tr.RoundTrip(newReq(t, "GET", base+"/hello", nil).WithContext(traceCtx))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || string(b) != "hello from nginx\n" ||
			resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" || resp.Header.Get("X-Proto") != "HTTP/2.0" {
			t.Fatalf("status %d proto %s body %q tls %v header %v", resp.StatusCode, resp.Proto, b, resp.TLS != nil, resp.Header)
		}
	})
	t.Run("POST", func(t *testing.T) {
		for _, n := range []int{5, 1 << 20} {
			body := strings.Repeat("p", n)
			resp, err := tr.RoundTrip(newReq(t, "POST", base+"/echo-len", strings.NewReader(body)).WithContext(traceCtx))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("got %d\n", n); resp.StatusCode != 200 || string(b) != want || resp.Proto != "HTTP/2.0" {
				t.Fatalf("status %d body %q, want %q", resp.StatusCode, b, want)
			}
		}
	})
	t.Run("exercise", func(t *testing.T) {
		tr := h2InteropTLSClient(cert)
		defer tr.CloseIdleConnections()
		h2InteropExercise(t, tr, h2InteropPeer{base: base, hello: "hello from nginx\n", trailers: true})
	})
	t.Run("many-concurrent-one-conn", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := 0; i < 64; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := tr.RoundTrip(newReq(t, "GET", base+"/hello", nil).WithContext(traceCtx))
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "hello from nginx\n" || resp.Proto != "HTTP/2.0" {
					errs <- fmt.Errorf("proto %s body %q", resp.Proto, b)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		mu.Lock()
		n := len(conns)
		mu.Unlock()
		if n != 1 {
			t.Fatalf("requests used %d connections, want 1", n)
		}
	})
}
