#!/usr/bin/env bash
# run-benchmarks.sh: run every Google Benchmark program (`*_bench`) in the release build.
# Placeholder: runs each program in turn with console output and exits 0 if there are none.
# Extra arguments are passed to every program, e.g. --benchmark_filter=Route.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_DIR=${BENCH_DIR:-build/release/benchmarks}

mapfile -t benches < <(find "$BENCH_DIR" -type f -name '*_bench' -perm -u+x 2>/dev/null | sort)
if ((${#benches[@]} == 0)); then
  echo "run-benchmarks: no *_bench programs under $BENCH_DIR; nothing to run."
  exit 0
fi

for bench in "${benches[@]}"; do
  echo "=== $bench"
  "$bench" --benchmark_format=console "$@"
done
