package server

import (
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// runClient runs an external client with a deadline and returns its
// combined output.
func runClient(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestCurl(t *testing.T) {
	curl := testpeer.Binary(t, "curl", "curl")
	st := startTLS(t, &http.Server{Handler: echoProto}, nil)
	caFile := writeCA(t)
	tests := []struct {
		flag        string
		wantVersion string // curl's %{http_version}
		wantBody    string
	}{
		{"--http1.1", "1.1", "HTTP/1.1"},
		{"--http2", "2", "HTTP/2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			url := "https://localhost:" + st.port + "/"
			out := runClient(t, curl, "--silent", "--show-error", "--max-time", "30", tt.flag,
				"--cacert", caFile, "--dump-header", "-", "--write-out", "\nversion=%{http_version}", url)
			if !strings.Contains(out, "\r\n\r\n"+tt.wantBody+"\nversion="+tt.wantVersion) {
				t.Fatalf("curl %s output:\n%s\nwant body %q over HTTP %s", tt.flag, out, tt.wantBody, tt.wantVersion)
			}
			wantAltSvc := `alt-svc: h3=":` + st.port + `"; ma=86400`
			if !strings.Contains(strings.ToLower(out), wantAltSvc) {
				t.Fatalf("curl %s: no %q in\n%s", tt.flag, wantAltSvc, out)
			}
		})
	}
}

// writeCA writes the test certificate (its own CA) and returns the path.
func writeCA(t *testing.T) string {
	t.Helper()
	certFile, _, err := testCert.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return certFile
}

var h2loadRequests = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)

func TestH2load(t *testing.T) {
	h2load := testpeer.Binary(t, "h2load", "nghttp2-client")
	st := startTLS(t, &http.Server{Handler: echoProto}, nil)
	const n = 2000
	out := runClient(t, h2load, "-n", strconv.Itoa(n), "-c", "4", "-m", "10", st.url("/"))
	if !strings.Contains(out, "Application protocol: h2") {
		t.Fatalf("h2load did not negotiate h2:\n%s", out)
	}
	m := h2loadRequests.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no requests line in h2load output:\n%s", out)
	}
	if m[4] != strconv.Itoa(n) {
		t.Fatalf("h2load: %s of %d requests succeeded (failed %s, errored %s, timeout %s)\n%s", m[4], n, m[5], m[6], m[7], out)
	}
	if !strings.Contains(out, "status codes: "+strconv.Itoa(n)+" 2xx") {
		t.Fatalf("h2load: not every status was 2xx:\n%s", out)
	}
}

// TestGtlsclient fetches over HTTP/3 with ngtcp2's example client (built on
// GnuTLS), an implementation independent of quic-go. It does not verify the
// certificate (it has no CA option); the test checks the HTTP/3 exchange.
func TestGtlsclient(t *testing.T) {
	gtls := testpeer.Binary(t, "gtlsclient", "ngtcp2-client")
	st := startTLS(t, &http.Server{Handler: echoProto}, nil)
	const streams = 5
	out := runClient(t, gtls, "--exit-on-all-streams-close", "--no-quic-dump", "--timeout=20s",
		"-n", strconv.Itoa(streams), "127.0.0.1", st.port, st.url("/"))
	if got := strings.Count(out, "[:status: 200]"); got != streams {
		t.Fatalf("%d responses with status 200, want %d:\n%s", got, streams, out)
	}
	if got := strings.Count(out, "|HTTP/3.0|"); got != streams {
		t.Fatalf("%d bodies \"HTTP/3.0\", want %d:\n%s", got, streams, out)
	}
}
