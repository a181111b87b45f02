#!/bin/bash
# cachegrind.sh counts the user-space instructions one benchmark op costs.
#
# usage: benchmarks/cachegrind.sh <test binary> <benchmark regexp> [N]
#
# It runs the benchmark row under valgrind's cachegrind twice, with N and
# with 3N iterations (N defaults to 4000), and prints the difference of the
# two instruction totals divided by 2N: start-up, set-up and the first
# iteration cancel out. GOGC=off keeps the collector's timing-dependent work
# out; GODEBUG=asyncpreemptoff=1 because valgrind does not mix well with
# Go's preemption signals; FERRY_BENCH_PIN=off because valgrind runs the
# client on one thread anyway. A benchmark's server child is not traced.
# Build the binary with `go test -c -o x.test ./<pkg>`. Needs valgrind.
set -euo pipefail
bin=$1
pat=$2
n=${3:-4000}
count() {
  GOGC=off GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 FERRY_BENCH_PIN=off \
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
    "$bin" -test.run '^$' -test.bench "$pat" -test.benchtime "${1}x" 2>&1 |
    awk '/I *refs:/ { gsub(",", "", $NF); print $NF }'
}
a=$(count "$n")
b=$(count $((3 * n)))
if [ -z "$a" ] || [ -z "$b" ]; then
  echo "cachegrind.sh: no instruction count (is valgrind installed? does $pat match one row?)" >&2
  exit 1
fi
echo "$pat: $(((b - a) / (2 * n))) instructions/op"
