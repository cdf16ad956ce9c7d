#!/usr/bin/env bash
# run-benchmarks.sh: postal against its CAF 0.17 peer, then the routing benchmark (`make bench`).
#
# Runs caf_bench, postal_bench and fiber_floor_bench from the release build BENCH_REPS times,
# interleaved (caf, postal, floor, caf, postal, floor, ...) so machine noise hits both sides. Each
# program prints its console table and writes JSON to BENCH_OUT. The bytes-per-idle-actor cases
# run in a fresh process each (a process that already ran other cases reuses the memory they
# freed, which would hide part of the growth being measured). Then scripts/bench_report.py pairs
# BM_CafX with BM_PostalX, takes medians, prints the report, writes it to BENCH_OUT/report.md and
# its summary into docs/benchmarks.md. Last, `postal bench --suite BENCH_ROUTING_SUITE` runs the
# routing scenarios beside their peers and writes BENCH_OUT/routing/routing.json and
# BENCH_OUT/routing/routing-report.html (generated; never committed).
#
# Environment: BENCH_DIR (build/release/benchmarks), BENCH_OUT (build/release/bench-results),
# BENCH_REPS (3), BENCH_MIN_TIME (0.3 seconds per case), BENCH_TIMEOUT (300 seconds per program),
# POSTAL (build/release/tools/postal), BENCH_ROUTING_SUITE (standard; empty skips `postal bench`),
# BENCH_ROUTING_TIMEOUT (900 seconds).
# Extra arguments are passed to every Google Benchmark program after ours, e.g.
# --benchmark_min_time=0.1.
# Exits non-zero when a program failed, hung or a case reported an error (after the report).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_DIR=${BENCH_DIR:-build/release/benchmarks}
BENCH_OUT=${BENCH_OUT:-build/release/bench-results}
BENCH_REPS=${BENCH_REPS:-3}
BENCH_MIN_TIME=${BENCH_MIN_TIME:-0.3}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-300}
POSTAL=${POSTAL:-build/release/tools/postal}
BENCH_ROUTING_SUITE=${BENCH_ROUTING_SUITE-standard}
BENCH_ROUTING_TIMEOUT=${BENCH_ROUTING_TIMEOUT:-900}

CAF=$BENCH_DIR/caf/caf_bench
POSTAL_BENCH=$BENCH_DIR/postal_bench
FLOOR=$BENCH_DIR/fiber_floor_bench
for bin in "$CAF" "$POSTAL_BENCH" "$FLOOR" ${BENCH_ROUTING_SUITE:+"$POSTAL"}; do
  if [[ ! -x $bin ]]; then
    echo "run-benchmarks: $bin is missing; build first: cmake --preset release && cmake --build build/release -j2" >&2
    exit 2
  fi
done

rm -rf "$BENCH_OUT"
mkdir -p "$BENCH_OUT"
failures=()

# background_busy: percent of all CPUs busy during 0.5 s while none of ours runs (/proc/stat).
# Other work on the machine shows here; the report prints it next to the results.
background_busy() {
  local a b i total=0 idle
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 0.5
  read -r -a b < <(grep '^cpu ' /proc/stat)
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  idle=$((b[4] - a[4] + b[5] - a[5]))
  echo $((total > 0 ? 100 * (total - idle) / total : 0))
}

# run NAME BINARY ARGS...: one program run, console on stdout, JSON in $BENCH_OUT/NAME.json.
run() {
  local name=$1 bin=$2 busy
  shift 2
  busy=$(background_busy)
  echo "$name $busy" >>"$BENCH_OUT/background.txt"
  echo "=== $name (background CPU busy before it: $busy%): $bin $*"
  local rc=0
  timeout --kill-after=10 "$BENCH_TIMEOUT" "$bin" --benchmark_min_time="$BENCH_MIN_TIME" \
    --benchmark_out="$BENCH_OUT/$name.json" --benchmark_out_format=json "$@" "${EXTRA_ARGS[@]}" ||
    rc=$?
  if ((rc != 0)); then
    local why="exit status $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${BENCH_TIMEOUT}s (hung?)"
    echo "run-benchmarks: $name failed: $why" >&2
    failures+=("$name: $why")
  fi
}

EXTRA_ARGS=("$@")
start=$SECONDS
for ((r = 1; r <= BENCH_REPS; ++r)); do
  run "caf-r$r" "$CAF" --benchmark_filter=-BytesPerIdle
  run "postal-r$r" "$POSTAL_BENCH" --benchmark_filter=-BytesPerIdle
  run "floor-r$r" "$FLOOR"
  for n in 100000 1000000; do
    run "caf-bytes$n-r$r" "$CAF" "--benchmark_filter=BM_CafBytesPerIdleActor/$n/"
    run "postal-bytes$n-r$r" "$POSTAL_BENCH" "--benchmark_filter=BM_PostalBytesPerIdleActor/$n/"
    run "postal-rootbytes$n-r$r" "$POSTAL_BENCH" "--benchmark_filter=BM_PostalBytesPerIdleRootActor/$n/"
  done
done
echo "run-benchmarks: ran in $((SECONDS - start)) s"

report_rc=0
python3 scripts/bench_report.py --results "$BENCH_OUT" --doc docs/benchmarks.md \
  --out "$BENCH_OUT/report.md" || report_rc=$?

# The routing benchmark: its own report (terminal, JSON, HTML), with its peers from the same build.
if [[ -n $BENCH_ROUTING_SUITE ]]; then
  echo "=== routing (background CPU busy before it: $(background_busy)%): $POSTAL bench --suite $BENCH_ROUTING_SUITE"
  # Its own folder: bench_report.py reads every *.json in BENCH_OUT as Google Benchmark output.
  mkdir -p "$BENCH_OUT/routing"
  rc=0
  timeout --kill-after=10 "$BENCH_ROUTING_TIMEOUT" "$POSTAL" bench --suite "$BENCH_ROUTING_SUITE" \
    --json "$BENCH_OUT/routing/routing.json" --html "$BENCH_OUT/routing/routing-report.html" ||
    rc=$?
  if ((rc != 0)); then
    why="exit status $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${BENCH_ROUTING_TIMEOUT}s (hung?)"
    echo "run-benchmarks: postal bench failed: $why" >&2
    failures+=("postal bench: $why")
  fi
fi

if ((${#failures[@]} > 0)); then
  printf 'run-benchmarks: failed: %s\n' "${failures[@]}" >&2
  exit 1
fi
exit "$report_rc"
