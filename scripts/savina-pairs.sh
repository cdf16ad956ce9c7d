#!/bin/bash
# Runs Savina workloads pairwise, CAF port first, then postal, as docs/benchmarks.md
# ("How it was measured") describes, and prints the medians and CAF/postal ratios.
#
# usage: savina-pairs.sh WORKLOAD...
#   WORKLOAD: pingpong count fjthrput fjcreate threadring chameneos big concdict
#             banking-blocking banking-then banking-become fib   (or "all": these twelve, one
#             postal style per CAF variant), or banking-stash (a second postal style beside
#             CAF's become/unbecome "fast", not in "all")
# environment:
#   SAVINA_BIN  postal's savina_bench (default /work/main/build/release/benchmarks/savina/savina_bench)
#   CAF_BIN     directory of the CAF builds (default /tmp/savina-caf/bin)
#   RUNS        iterations per side (default 5)
#   THREADS     worker threads per side (default 2)
#   LOG_DIR     where each program's full output is kept (default /tmp/savina-pairs-logs/<UTC time>)
# output: one line per workload:
#   name  CAF-median-ms  postal-median-ms  ratio(CAF/postal)  caf=[raw...]  postal=[raw...]
# then the geometric mean of the ratios. Ratio > 1: postal is faster.

set -u
SAVINA_BIN=${SAVINA_BIN:-/work/main/build/release/benchmarks/savina/savina_bench}
CAF_BIN=${CAF_BIN:-/tmp/savina-caf/bin}
RUNS=${RUNS:-5}
THREADS=${THREADS:-2}
LOG_DIR=${LOG_DIR:-/tmp/savina-pairs-logs/$(date -u +%Y%m%dT%H%M%SZ)}

ALL="pingpong count fjthrput fjcreate threadring chameneos big concdict banking-blocking banking-then banking-become fib"

caf_program() {
  case $1 in
    pingpong) echo caf_01_pingpong ;;
    count) echo caf_02_count ;;
    fjthrput) echo caf_03_fjthrput ;;
    fjcreate) echo caf_04_fjcreate ;;
    threadring) echo caf_05_threadring ;;
    chameneos) echo caf_06_chameneos ;;
    big) echo caf_07_big ;;
    concdict) echo caf_08_concdict ;;
    banking-blocking) echo caf_15_banking_request_await_high_timeout ;;
    banking-then) echo caf_15_banking_request_then_high_timeout ;;
    banking-become | banking-stash) echo caf_15_banking_become_unbecome_fast ;;
    fib) echo caf_29_fib ;;
    *) return 1 ;;
  esac
}

if [ $# -eq 0 ]; then
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
args=()
for w in "$@"; do
  if [ "$w" = all ]; then args+=($ALL); else args+=("$w"); fi
done
set -- "${args[@]}"
for w in "$@"; do
  caf_program "$w" >/dev/null || { echo "unknown workload: $w (known: $ALL)" >&2; exit 2; }
done
[ -x "$SAVINA_BIN" ] || { echo "SAVINA_BIN not executable: $SAVINA_BIN" >&2; exit 2; }
mkdir -p "$LOG_DIR"
echo "# $(date -u '+%F %T') UTC  runs $RUNS  threads $THREADS  load: $(cut -d' ' -f1-3 /proc/loadavg)  logs: $LOG_DIR" >&2
echo "# postal: $SAVINA_BIN" >&2

ratios=()
failed=0
printf '%-17s %-44s %10s %10s %7s  %s\n' workload caf_program caf_ms postal_ms ratio raw
for w in "$@"; do
  prog=$(caf_program "$w")
  caf_log=$LOG_DIR/$w.caf.log
  postal_log=$LOG_DIR/$w.postal.log

  "$CAF_BIN/$prog" --iterations="$RUNS" --scheduler.max-threads="$THREADS" >"$caf_log" 2>&1
  caf_rc=$?
  "$SAVINA_BIN" --workload "$w" --threads "$THREADS" --runs "$RUNS" >"$postal_log" 2>&1
  postal_rc=$?

  # CAF port: "     caf_01_pingpong          iteration-0:    74.353 ms"
  caf_raw=$(sed -nE 's/^.* iteration-[0-9]+: +([0-9.]+) ms *$/\1/p' "$caf_log" | tr '\n' ' ')
  # postal: "... pingpong median of 5: 26.1 ms (threads 2; runs 42.4 20.3 26.1 49.1 23.1 ms; ..."
  postal_raw=$(sed -nE "s/^.* $w median of [0-9]+: [0-9.]+ ms \\(threads [0-9]+; runs ([0-9. ]+) ms;.*/\\1/p" "$postal_log" | tail -1)

  line=$(python3 - "$w" "$prog" "$RUNS" "$caf_rc" "$postal_rc" "$caf_raw" "$postal_raw" <<'EOF'
import sys, statistics
w, prog, runs, caf_rc, postal_rc, caf_raw, postal_raw = sys.argv[1:]
caf = [float(x) for x in caf_raw.split()]
pst = [float(x) for x in postal_raw.split()]
err = []
if caf_rc != "0": err.append(f"CAF exit {caf_rc}")
if postal_rc != "0": err.append(f"postal exit {postal_rc}")
if len(caf) != int(runs): err.append(f"CAF gave {len(caf)} times")
if len(pst) != int(runs): err.append(f"postal gave {len(pst)} times")
if err:
    print("ERR " + f"{w:<17} {prog:<44} " + "; ".join(err))
    sys.exit()
cm, pm = statistics.median(caf), statistics.median(pst)
r = cm / pm
fmt = lambda v: " ".join(f"{x:.1f}" for x in v)
print(f"OK {r:.6f} {w:<17} {prog:<44} {cm:10.1f} {pm:10.1f} {r:6.2f}x  caf=[{fmt(caf)}] postal=[{fmt(pst)}]")
EOF
)
  case $line in
    OK\ *)
      read -r _ r _ <<<"$line"
      ratios+=("$r")
      echo "${line#OK * }" ;;
    *)
      failed=1
      echo "${line#ERR }  (see $caf_log, $postal_log)" ;;
  esac
done

if [ ${#ratios[@]} -gt 0 ]; then
  python3 -c '
import sys, math
r = [float(x) for x in sys.argv[1:]]
print(f"geometric mean of {len(r)} ratio(s) (CAF/postal): {math.exp(sum(map(math.log, r)) / len(r)):.2f}x")
' "${ratios[@]}"
fi
exit $failed
