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

# module@version and the packages whose tests run. Each sends its requests
# through http.DefaultTransport (a nil Client.Transport, http.DefaultClient,
# or the transport itself), which is what Install reaches.
default_libs=(
  "golang.org/x/oauth2@v0.38.0 . ./internal/... ./clientcredentials ./jwt"
  "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp@v0.72.0 ."
  "github.com/google/go-github/v84@v84.0.0 ./github"
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
  read -r modver pkgs <<<"$entry"
  mod=${modver%@*}
  dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$modver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "libsuites: cannot download $modver" >&2; exit 1; }
  src="$work/$(echo "$mod" | tr '/@' '__')"
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
  (
    cd "$src"
    go mod edit -require=github.com/ferryhttp/ferry@v0.0.0 -replace=github.com/ferryhttp/ferry="$repo"
    npkg=0
    for pkgdir in $(go list -f '{{.Dir}}' $pkgs); do
      npkg=$((npkg + 1))
      name=$(go list -f '{{.Name}}' "$pkgdir")
      cat >"$pkgdir/zz_ferry_install_test.go" <<GO
package $name

import (
	"os"
	"testing"

	"github.com/ferryhttp/ferry/transport"
)

// Added by ferry's benchmarks/libsuites.sh: adopt ferry as a program would.
func init() {
	if os.Getenv("FERRY_LIBSUITE") == "1" {
		transport.Install()
	}
}

// Runs last (last file, last test): says how many requests ferry answered
// in this package's run; the script adds them up.
func TestZZFerryCarriedRequests(t *testing.T) {
	if os.Getenv("FERRY_LIBSUITE") != "1" {
		t.Skip("net/http run")
	}
	s := transport.Installed().Stats()
	t.Logf("ferry answered %d requests (h1 %d, h2 %d, h3 %d)", s.Requests.Total(), s.Requests.H1, s.Requests.H2, s.Requests.H3)
}
GO
    done
    go mod tidy >/dev/null 2>&1 || go mod tidy
    go test -count=1 -v $pkgs >"$work/std.out" 2>&1 || true
    FERRY_LIBSUITE=1 go test -count=1 -v $pkgs >"$work/ferry.out" 2>&1 || true
    read -r sp sf ss <<<"$(count "$work/std.out")"
    read -r fp ff fs <<<"$(count "$work/ferry.out")"
    # The marker test is a skip in the net/http run and a pass in ferry's,
    # once per package.
    served=$(sed -n 's/.*ferry answered \([0-9]*\) requests.*/\1/p' "$work/ferry.out" | awk '{n += $1} END {print n + 0}')
    printf '%-70s %-22s %-22s\n' "$modver ($pkgs)" "$sp/$sf/$((ss - npkg))" "$((fp - npkg))/$ff/$fs"
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
