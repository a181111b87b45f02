package transport

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
)

// A request body that is an *os.File goes to the connection's ReadFrom, so
// that over plain TCP on Linux the kernel copies it (sendfile), as net/http
// sends it. The proof is the sendfile calls strace sees in a child process
// that makes one such request.

// fileBodyChildEnv selects the child's scenario: "<impl>/<framing>".
const fileBodyChildEnv = "FERRY_REQBODY8_SENDFILE_CHILD"

// fileBodySize is the file body's size: large enough that a copy
// through user space takes hundreds of read and write calls.
const fileBodySize = 8 << 20

// writeBodyFile writes a file of size bytes of seeded pseudo-random data
// and returns its path and SHA-256.
func writeBodyFile(t testing.TB, size int) (string, string) {
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{'r', 'e', 'q', 'b', 'o', 'd', 'y', '8'}).Read(data)
	path := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return path, hex.EncodeToString(sum[:])
}

// hashBody answers a request with the length and SHA-256 of its body and
// its transfer coding.
func hashBody(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%d %x %q", n, h.Sum(nil), r.TransferEncoding)
}

// hashingServer serves hashBody over plain HTTP, or HTTPS with cert.
func hashingServer(t testing.TB, cert *selfsigned.Cert) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(hashBody))
	if cert != nil {
		srv.TLS = cert.ServerConfig()
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// fileBodyFramings are the ways a file body is framed: the body as is
// with its length, in io.NopCloser with its length, and chunked.
var fileBodyFramings = map[string]func(f *os.File, size int64) (io.ReadCloser, int64){
	"length":           func(f *os.File, size int64) (io.ReadCloser, int64) { return f, size },
	"NopCloser+length": func(f *os.File, size int64) (io.ReadCloser, int64) { return io.NopCloser(f), size },
	"chunked":          func(f *os.File, size int64) (io.ReadCloser, int64) { return f, -1 },
}

// sendFileBody sends the file at path through rt with framing and checks
// what the server received.
func sendFileBody(t testing.TB, rt http.RoundTripper, url, path, sum, framing string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	body, n := fileBodyFramings[framing](f, fileBodySize)
	req, err := http.NewRequest("PUT", url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	resp, err := rt.RoundTrip(req)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	te := "[]"
	if n < 0 {
		te = `["chunked"]`
	}
	if want := fmt.Sprintf("%d %s %s", fileBodySize, sum, te); err != nil || string(got) != want {
		t.Fatalf("server got %q (%v), want %q", got, err, want)
	}
}

// TestFileBodySendfileChild is the child of TestFileBodySendfile:
// one file body request, traced by strace. It does nothing unless started
// by that test.
func TestFileBodySendfileChild(t *testing.T) {
	scenario := os.Getenv(fileBodyChildEnv)
	if scenario == "" {
		t.Skip("child of TestFileBodySendfile")
	}
	impl, framing, _ := strings.Cut(scenario, "/")
	path, sum := writeBodyFile(t, fileBodySize)
	srv := hashingServer(t, nil)
	rt := zeroClient(impl)
	defer closeIdle(rt)
	sendFileBody(t, rt, srv.URL, path, sum, framing)
}

// sendfileResult matches a completed sendfile call in strace's output (a
// whole line or the end of a resumed one) and captures the bytes it moved.
var sendfileResult = regexp.MustCompile(`sendfile(?:\(| resumed>).*\)\s+=\s+(\d+)\s*$`)

// tracedSendfileBytes runs the child scenario under strace and returns the
// bytes sendfile moved in it.
func tracedSendfileBytes(t *testing.T, strace, scenario string) int64 {
	out := filepath.Join(t.TempDir(), "strace.out")
	cmd := exec.Command(strace, "-f", "-qq", "-e", "trace=sendfile", "-o", out,
		os.Args[0], "-test.run", "^TestFileBodySendfileChild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), fileBodyChildEnv+"="+scenario)
	if b, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(b), "PTRACE") || strings.Contains(string(b), "ptrace") {
			t.Skipf("strace cannot trace here: %s", b)
		}
		t.Fatalf("%s: child failed: %v\n%s", scenario, err, b)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(string(trace), "\n") {
		if m := sendfileResult.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			total += n
		}
	}
	return total
}

// TestFileBodySendfile: an *os.File body with a known length goes
// out with sendfile over plain TCP, as net/http sends it; ferry copied it
// through a 32 KiB buffer (a read and a write per piece), since the reader
// that tags the body's errors hid the file from the connection's ReadFrom.
// A chunked file body is copied through user space by both. ferry also
// sends a file in io.NopCloser with sendfile, which net/http does not (its
// request wrapper hides the file from its own unwrapping).
func TestFileBodySendfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes under strace")
	}
	strace := testpeer.Binary(t, "strace", "strace") // counts the sendfile calls
	for _, framing := range []string{"length", "NopCloser+length", "chunked"} {
		t.Run(framing, func(t *testing.T) {
			nethttp := tracedSendfileBytes(t, strace, "nethttp/"+framing)
			ferry := tracedSendfileBytes(t, strace, "ferry/"+framing)
			t.Logf("bytes sent with sendfile: net/http %d, ferry %d", nethttp, ferry)
			switch framing {
			case "length":
				if nethttp != fileBodySize {
					t.Skipf("net/http sent %d bytes with sendfile, not the whole body: no sendfile here", nethttp)
				}
				if ferry != fileBodySize {
					t.Errorf("ferry sent %d bytes with sendfile, net/http all %d", ferry, nethttp)
				}
			case "NopCloser+length":
				if ferry != fileBodySize {
					t.Errorf("ferry sent %d bytes with sendfile, want all %d", ferry, fileBodySize)
				}
			case "chunked":
				if ferry != nethttp {
					t.Errorf("ferry sent %d bytes with sendfile, net/http %d", ferry, nethttp)
				}
			}
		})
	}
}

// TestFileBodyDelivered: a file body arrives whole, framed as
// asked, over plain TCP (ReadFrom, sendfile) and TLS (copied), from both
// transports.
func TestFileBodyDelivered(t *testing.T) {
	cert := proxyTestCert(t)
	path, sum := writeBodyFile(t, fileBodySize)
	for _, useTLS := range []bool{false, true} {
		for _, framing := range []string{"length", "NopCloser+length", "chunked"} {
			for _, impl := range []string{"nethttp", "ferry"} {
				t.Run(fmt.Sprintf("tls=%v/%s/%s", useTLS, framing, impl), func(t *testing.T) {
					var srv *httptest.Server
					var tlsCfg *tls.Config
					if useTLS {
						srv = hashingServer(t, cert)
						tlsCfg = tlsTestConfig(cert)
					} else {
						srv = hashingServer(t, nil)
					}
					rt := settings{}.nethttp(tlsCfg)
					if impl == "ferry" {
						rt = settings{}.ferry(tlsCfg)
					}
					defer closeIdle(rt)
					sendFileBody(t, rt, srv.URL, path, sum, framing)
				})
			}
		}
	}
}

// sparseFile creates a file of size bytes (zeros, no disk blocks).
func sparseFile(t testing.TB, size int64) string {
	path := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return path
}

// putFile sends the file at path as a PUT body with length n through rt
// and returns RoundTrip's error (closing any response).
func putFile(t *testing.T, rt http.RoundTripper, ctx context.Context, url, path string, n int64) error {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, "PUT", url, f)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	resp, err := rt.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return err
}

// TestFileBodyErrors: a file body that fails, on the body's side
// or the connection's, fails the request as before the file went to the
// connection's ReadFrom: a read error of the file is the caller's error
// itself (ferry returns a body's Read error as is), a file shorter than its
// ContentLength is net/http's length error, and a connection reset while
// sendfile runs is not blamed on the file.
func TestFileBodyErrors(t *testing.T) {
	dir := t.TempDir()
	short, _ := writeBodyFile(t, 1<<20)
	big := sparseFile(t, 64<<20)
	for _, row := range []struct {
		name   string
		script func(c *rawConn)
		path   string
		length int64
		check  func(t *testing.T, impl string, err error)
	}{
		{"read-error", hashingScript, dir, 5, func(t *testing.T, impl string, err error) {
			if !errors.Is(err, syscall.EISDIR) {
				t.Errorf("%s: error %v, want the body's read error (EISDIR)", impl, err)
			}
			if _, ok := err.(*fs.PathError); impl == "ferry" && !ok {
				t.Errorf("ferry: error %T %v, want the body's *fs.PathError itself", err, err)
			}
		}},
		{"shorter-than-length", hashingScript, short, 1<<20 + 10, func(t *testing.T, impl string, err error) {
			want := fmt.Sprintf("http: ContentLength=%d with Body length %d", 1<<20+10, 1<<20)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v, want %q", impl, err, want)
			}
		}},
		{"reset-while-sending", func(c *rawConn) {
			if _, err := http.ReadRequest(c.br); err == nil {
				c.Conn.(*net.TCPConn).SetLinger(0)
			}
		}, big, 64 << 20, func(t *testing.T, impl string, err error) {
			var pe *fs.PathError
			if err == nil || errors.As(err, &pe) {
				t.Errorf("%s: error %v, want the connection's", impl, err)
			}
		}},
	} {
		t.Run(row.name, func(t *testing.T) {
			for _, impl := range []string{"nethttp", "ferry"} {
				srv := startRawServer(t, row.script)
				rt := zeroClient(impl)
				// Hang guard: a body error taken for the connection's
				// leaves the request waiting for an answer that needs
				// the rest of the body.
				ctx, cancel := context.WithTimeout(context.Background(), fileBodyHang)
				err := putFile(t, rt, ctx, srv.URL, row.path, row.length)
				cancel()
				closeIdle(rt)
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s: the request hung until the hang guard", impl)
				}
				row.check(t, impl, err)
			}
		})
	}
}

// hashingScript serves hashBody on a raw connection: one request, read
// whole, answered with its length and hash.
func hashingScript(c *rawConn) {
	req, err := http.ReadRequest(c.br)
	if err != nil {
		return
	}
	rec := httptest.NewRecorder()
	hashBody(rec, req)
	rec.Result().Write(c)
}

// TestFileBodyCancelDuringSendfile: the context is cancelled
// while sendfile waits for a server that stopped reading; RoundTrip
// returns the context's error, as net/http's does.
func TestFileBodyCancelDuringSendfile(t *testing.T) {
	big := sparseFile(t, 64<<20)
	for _, impl := range []string{"nethttp", "ferry"} {
		headRead := make(chan struct{})
		srv := startRawServer(t, func(c *rawConn) {
			if _, err := http.ReadRequest(c.br); err != nil {
				return
			}
			close(headRead)
			<-c.s.close // reads nothing more
		})
		rt := zeroClient(impl)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- putFile(t, rt, ctx, srv.URL, big, 64<<20) }()
		select {
		case <-headRead:
		case err := <-done:
			cancel()
			t.Fatalf("%s: RoundTrip returned %v before the server read the head", impl, err)
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: error %v, want context.Canceled", impl, err)
			}
		case <-time.After(fileBodyHang):
			srv.abort()
			<-done
			t.Fatalf("%s: RoundTrip did not return after the context was cancelled", impl)
		}
		closeIdle(rt)
	}
}
