package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The adoption tests run real programs (testdata/adopt, testdata/adoptblank)
// because what matters is what a whole process does after adopting ferry:
// which requests go through it, and whether the type assertion libraries
// do on http.DefaultTransport still works.

// buildAdoptPrograms builds the testdata programs into a directory the test
// owns (removed when it ends, so -count=N rebuilds rather than finding the
// programs of an earlier iteration gone); the go build cache keeps it cheap.
func buildAdoptPrograms(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds programs")
	}
	dir := t.TempDir()
	for _, p := range []string{"adopt", "adoptblank"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, p), "./testdata/"+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", p, err, out)
		}
	}
	return dir
}

func TestInstallPrograms(t *testing.T) {
	dir := buildAdoptPrograms(t)
	tests := []struct {
		name       string
		prog       string
		args       []string
		wantExit   int
		wantOut    []string // lines that must be printed
		wantStderr string   // text stderr must contain
	}{
		{
			name: "install/assertion-still-works",
			prog: "adopt", args: []string{"-mode", "install"},
			wantOut: []string{
				"dialcontext-dropped true",
				"http.Get ok",
				"client-nil-transport ok",
				"ferry-requests 2", // http.Get and a client with a nil Transport
				"cloned-default-transport ok",
				"ferry-requests-final 2", // a Clone is net/http's
			},
		},
		{
			name: "default-transport/assertion-panics",
			prog: "adopt", args: []string{"-mode", "default-transport"},
			wantExit: 2,
			wantOut: []string{
				"http.Get ok",
				"client-nil-transport ok",
				"ferry-requests 2", // both: every nil Transport means ferry now
			},
			wantStderr: "interface conversion: http.RoundTripper is *transport.Transport, not *http.Transport",
		},
		{
			name: "install/undo",
			prog: "adopt", args: []string{"-mode", "install", "-undo"},
			wantOut: []string{"installed-after-undo false", "http.Get ok", "ferry-requests 0", "cloned-default-transport ok"},
		},
		{
			name: "default-transport/undo",
			prog: "adopt", args: []string{"-mode", "default-transport", "-undo"},
			wantOut: []string{"installed-after-undo false", "ferry-requests 0", "cloned-default-transport ok", "ferry-requests-final 0"},
		},
		{
			name: "none/baseline",
			prog: "adopt", args: []string{"-mode", "none"},
			wantOut: []string{"http.Get ok", "client-nil-transport ok", "cloned-default-transport ok"},
		},
		{
			name:    "blank-import",
			prog:    "adoptblank",
			wantOut: []string{"ferry-requests 1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(dir, tc.prog), tc.args...)
			cmd.Env = append(os.Environ(), "HTTP_PROXY=", "http_proxy=", "NO_PROXY=*")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			exit := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tc.wantExit {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", exit, tc.wantExit, out, stderr.String())
			}
			lines := strings.Split(string(out), "\n")
			for _, want := range tc.wantOut {
				found := false
				for _, l := range lines {
					if l == want {
						found = true
					}
				}
				if !found {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantStderr, stderr.String())
			}
		})
	}
}

// TestInstallInProcess checks, in this process, what Install's fallback
// (http.DefaultClient only) and InstallDefaultTransport change, which
// settings they carry over, and that undo puts everything back. The tests
// of this package do not run in parallel, so changing these globals here
// is safe; Install itself registers on http.DefaultTransport for the
// process, so it is tested in child processes only.
func TestInstallInProcess(t *testing.T) {
	std := http.DefaultTransport.(*http.Transport)
	t.Run("default-client-fallback", func(t *testing.T) {
		undo := installDefaultClient()
		tr, ok := http.DefaultClient.Transport.(*Transport)
		if !ok || Installed() != tr || http.DefaultTransport != http.RoundTripper(std) {
			t.Fatalf("after Install: DefaultClient.Transport %T, DefaultTransport %T", http.DefaultClient.Transport, http.DefaultTransport)
		}
		if tr.DialContext != nil || tr.MaxIdleConns != std.MaxIdleConns || tr.IdleConnTimeout != std.IdleConnTimeout ||
			!tr.ForceAttemptHTTP2 || tr.Proxy == nil {
			t.Fatalf("settings not carried over from http.DefaultTransport: %+v", tr)
		}
		undo()
		undo() // a second call does nothing
		if http.DefaultClient.Transport != nil || Installed() != nil {
			t.Fatalf("after undo: DefaultClient.Transport %T, Installed %v", http.DefaultClient.Transport, Installed())
		}
	})
	t.Run("default-transport", func(t *testing.T) {
		undo := InstallDefaultTransport()
		if _, ok := http.DefaultTransport.(*Transport); !ok || http.DefaultClient.Transport != nil {
			t.Fatalf("after InstallDefaultTransport: DefaultTransport %T, DefaultClient.Transport %T", http.DefaultTransport, http.DefaultClient.Transport)
		}
		undo()
		if http.DefaultTransport != http.RoundTripper(std) || Installed() != nil {
			t.Fatalf("after undo: DefaultTransport %T", http.DefaultTransport)
		}
	})
	t.Run("keeps-program-settings", func(t *testing.T) {
		// A client transport the program configured, with its own dialer:
		// both the dialer and the limits carry over.
		var dials int
		mine := &http.Transport{
			MaxConnsPerHost: 7,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials++
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}
		sameDialer := &http.Transport{DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}
		http.DefaultClient.Transport = mine
		undo := installDefaultClient()
		tr := Installed()
		if tr.MaxConnsPerHost != 7 || tr.DialContext == nil {
			t.Fatalf("program's transport not carried over: MaxConnsPerHost %d, DialContext nil %v", tr.MaxConnsPerHost, tr.DialContext == nil)
		}
		undo()
		if http.DefaultClient.Transport != http.RoundTripper(mine) {
			t.Fatalf("undo restored %T, want the program's transport", http.DefaultClient.Transport)
		}
		http.DefaultClient.Transport = sameDialer
		undo = installDefaultClient()
		if Installed().DialContext == nil {
			t.Fatal("a net.Dialer the program configured was dropped")
		}
		undo()
		http.DefaultClient.Transport = nil
	})
	t.Run("undo-after-replacement", func(t *testing.T) {
		// Something replaced ferry after Install: undo leaves that alone.
		undo := installDefaultClient()
		other := &http.Transport{}
		http.DefaultClient.Transport = other
		undo()
		if http.DefaultClient.Transport != http.RoundTripper(other) {
			t.Fatalf("undo replaced a transport installed after ferry")
		}
		http.DefaultClient.Transport = nil
	})
}
