#!/usr/bin/env bash
# libsuites.sh runs the test suites of widely used HTTP client libraries,
# written by other people, twice each: once as published (net/http), and once
# with ferry adopted through transport.Install, as a program adopts it. It
# prints the pass/fail/skip counts of both runs side by side.
#
# Each library is fetched through the Go module proxy (go mod download) and
# copied to a scratch folder, where two files are added to each package under
# test: an init that calls transport.Install when FERRY_LIBSUITE=1, and a last
# test that fails unless ferry answered at least one request in that run, so a
# run in which ferry carried nothing cannot pass for a compatible one.
#
# Usage: benchmarks/libsuites.sh [module@version package-pattern]...
# With no arguments it runs the libraries listed below.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# Each entry: module@version|packages whose tests run|optional edit.
# Install reaches the libraries whose tests send their requests through
# http.DefaultTransport (a nil Client.Transport, http.DefaultClient, or the
# transport itself). A library whose tests build their own *http.Transport
# is put on ferry with transport.From, as its users would: the edit is a sed
# expression applied to one file, "file:expression", that wraps that
# transport in ferryFrom (which is transport.From in ferry's run and the
# transport itself in net/http's).
default_libs=(
  "golang.org/x/oauth2@v0.38.0|. ./internal/... ./clientcredentials ./jwt|"
  "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp@v0.72.0|.|"
  "github.com/google/go-github/v84@v84.0.0|./github|github/github_test.go:s/Transport: transport,/Transport: ferryFrom(transport),/"
)
libs=("$@")
[ ${#libs[@]} -gt 0 ] || libs=("${default_libs[@]}")

count() { # count FILE: passed failed skipped (top-level tests and subtests)
  local f=$1
  printf '%s %s %s' "$(grep -cE '^ *--- PASS' "$f" || true)" \
    "$(grep -cE '^ *--- FAIL' "$f" || true)" "$(grep -cE '^ *--- SKIP' "$f" || true)"
}

printf '%-70s %-22s %-22s\n' "library (packages)" "net/http pass/fail/skip" "ferry pass/fail/skip"
for entry in "${libs[@]}"; do
  IFS='|' read -r modver pkgs edit <<<"$entry"
  mod=${modver%@*}
  dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$modver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "libsuites: cannot download $modver" >&2; exit 1; }
  src="$work/$(echo "$mod" | tr '/@' '__')"
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
  (
    cd "$src"
    go mod edit -require=github.com/ferryhttp/ferry@v0.0.0 -replace=github.com/ferryhttp/ferry="$repo"
    nmarker=0
    for pkgdir in $(go list -f '{{.Dir}}' $pkgs); do
      name=$(go list -f '{{.Name}}' "$pkgdir")
      cat >"$pkgdir/zz_ferry_install_test.go" <<GO
package $name

import (
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/transport"
)

// ferryFrom puts a transport the suite builds itself on ferry in ferry's
// run (transport.From), and leaves it as it is in net/http's.
func ferryFrom(t *http.Transport) http.RoundTripper {
	if os.Getenv("FERRY_LIBSUITE") == "1" {
		ft := transport.From(t)
		fromMu.Lock()
		fromTransports = append(fromTransports, ft)
		fromMu.Unlock()
		return ft
	}
	return t
}

var (
	fromMu         sync.Mutex            // guards fromTransports
	fromTransports []*transport.Transport // made by ferryFrom, for their Stats
)

// Added by ferry's benchmarks/libsuites.sh: adopt ferry as a program would.
func init() {
	if os.Getenv("FERRY_LIBSUITE") == "1" {
		transport.Install()
	}
}

// ferryReport prints how many requests ferry answered in this package's
// run (Install's Transport and every one ferryFrom made); the script adds
// them up.
func ferryReport() {
	var total, h1, h2, h3 uint64
	fromMu.Lock()
	all := append(fromTransports, transport.Installed())
	fromMu.Unlock()
	for _, tr := range all {
		if tr == nil {
			continue
		}
		s := tr.Stats()
		total, h1, h2, h3 = total+s.Requests.Total(), h1+s.Requests.H1, h2+s.Requests.H2, h3+s.Requests.H3
	}
	fmt.Printf("ferry answered %d requests (h1 %d, h2 %d, h3 %d)\n", total, h1, h2, h3)
}
GO
      if grep -q '^func TestMain(' "$pkgdir"/*_test.go; then
        # The package has a TestMain: report from a last test (parallel
        # tests may still be running, so the count can be low).
        nmarker=$((nmarker + 1))
        cat >>"$pkgdir/zz_ferry_install_test.go" <<'GO'

func TestZZFerryCarriedRequests(t *testing.T) {
	if os.Getenv("FERRY_LIBSUITE") != "1" {
		t.Skip("net/http run")
	}
	ferryReport()
}
GO
      else
        cat >>"$pkgdir/zz_ferry_install_test.go" <<'GO'

// TestMain reports once every test, parallel ones included, has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv("FERRY_LIBSUITE") == "1" {
		ferryReport()
	}
	os.Exit(code)
}
GO
      fi
    done
    if [ -n "$edit" ]; then
      sed -i "${edit#*:}" "${edit%%:*}"
    fi
    go mod tidy >/dev/null 2>&1 || go mod tidy
    go test -count=1 -v $pkgs >"$work/std.out" 2>&1 || true
    FERRY_LIBSUITE=1 go test -count=1 -v $pkgs >"$work/ferry.out" 2>&1 || true
    read -r sp sf ss <<<"$(count "$work/std.out")"
    read -r fp ff fs <<<"$(count "$work/ferry.out")"
    # The marker test (in packages with a TestMain of their own) is a skip
    # in the net/http run and a pass in ferry's.
    served=$(sed -n 's/.*ferry answered \([0-9]*\) requests.*/\1/p' "$work/ferry.out" | awk '{n += $1} END {print n + 0}')
    printf '%-70s %-22s %-22s\n' "$modver ($pkgs)" "$sp/$sf/$((ss - nmarker))" "$((fp - nmarker))/$ff/$fs"
    echo "    requests answered by ferry in its run: $served"
    grep -E '^ *--- FAIL' "$work/ferry.out" | sed 's/^/    ferry: /' || true
    grep -E '^ *--- FAIL' "$work/std.out" | sed 's/^/    net\/http: /' || true
    if [ "$served" -eq 0 ]; then
      echo "    libsuites: ferry answered no request of $modver: its run does not count" >&2
      touch "$work/not-on-ferry"
    fi
  )
done
if [ -e "$work/not-on-ferry" ]; then
  exit 1
fi
