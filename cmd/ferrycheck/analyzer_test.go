package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/go/analysis/analysistest"
)

// TestAnalyzerFixtures: every assertion, type switch and field access in
// testdata/src/example.com is reported with its message (the "want"
// comments), including a dependency's findings at the import that brings
// it in, and nothing else is.
func TestAnalyzerFixtures(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), Analyzer, "example.com/app", "example.com/lib")
}

// restyVersion is a release of go-resty/resty v2 whose Client.Transport
// asserts its client's http.RoundTripper to *http.Transport and whose
// TLS and proxy setters write fields of the result.
const restyVersion = "v2.17.2"

// TestAnalyzerOnResty builds ferrycheck and runs it, alone and as a go vet
// tool, on go-resty/resty v2 fetched from the module proxy: it must report
// resty's assertion and the fields its setters write through it, and exit
// with status 3 (vet: 1). Without network it is skipped, unless CI=true.
func TestAnalyzerOnResty(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches a module and builds a tool")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/go-resty/resty/v2@"+restyVersion).Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err == nil && (mod.Error != "" || mod.Dir == "") {
		err = errors.New(mod.Error)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = errors.New(string(ee.Stderr) + string(out))
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("go mod download resty %s: %v", restyVersion, err)
		}
		t.Skipf("module proxy unreachable (set CI=true to fail instead): go mod download resty %s: %v", restyVersion, err)
	}

	bin := filepath.Join(t.TempDir(), "ferrycheck")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	want := []string{
		"client.go:1362:22: http.RoundTripper asserted to *http.Transport: fails when the value is a ferry Transport",
		"client.go:817:12: writes field TLSClientConfig of the *http.Transport from the type assertion at client.go:1362",
		"client.go:840:12: writes field Proxy of the *http.Transport from the type assertion at client.go:1362",
	}
	for _, run := range []struct {
		name     string
		args     []string
		wantExit int
	}{
		{"singlechecker", []string{bin, "-test=false", "./..."}, 3},
		{"go-vet", []string{"go", "vet", "-vettool=" + bin, "."}, 1},
	} {
		t.Run(run.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, run.args[0], run.args[1:]...)
			cmd.Dir = mod.Dir
			// The module cache is read-only; resty's dependencies are
			// fetched as the go command needs them.
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
			b, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != run.wantExit {
				t.Fatalf("%v: %v (want exit status %d)\n%s", run.args, err, run.wantExit, b)
			}
			got := strings.ReplaceAll(string(b), mod.Dir+string(filepath.Separator), "")
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
