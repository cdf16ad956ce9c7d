#!/usr/bin/env python3
"""bench_report.py: pair CAF and postal benchmark results and write the comparison table.

Reads every Google Benchmark JSON file in --results (written by scripts/run-benchmarks.sh), pairs
BM_CafX with BM_PostalX by name, takes the median of each counter over the repetitions, prints a
markdown report, writes it to --out and replaces the text between `<!-- bench:begin -->` and
`<!-- bench:end -->` in --doc (appending the markers when the file has none) with its summary:
everything but the table of every run, which stays in --out.

This is the report of the Google Benchmark programs (postal_bench, caf_bench, fiber_floor_bench).
`postal bench`, the routing benchmark, writes its own report (benchmarks/routing/).

Ratios: for rates postal/CAF (>1: postal faster); for bytes per idle actor CAF/postal (>1: postal
smaller). A case that reported an error in some run is left out of that run's median and named
under the table. Exit status 1 when a paired case has no successful run at all.
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
from datetime import datetime, timezone

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"

# Paired workloads: (CAF case, postal case, counter, target ratio or None).
PAIRS = [
    ("PingPong", "PingPong", "msgs_per_s", 3.0),
    ("PingPong1Thread", "PingPong1Thread", "msgs_per_s", 3.0),
    ("FanOut4", "FanOut4", "msgs_per_s", 1.0),
    ("FanIn4", "FanIn4", "msgs_per_s", 1.0),
    ("RequestReply", "RequestReply", "round_trips_per_s", 3.0),
    ("Spawn", "Spawn", "spawns_per_s", 1.0),
    ("BytesPerIdleActor/100000", "BytesPerIdleActor/100000", "bytes_per_actor", 1.0),
    ("BytesPerIdleActor/1000000", "BytesPerIdleActor/1000000", "bytes_per_actor", 1.0),
]
# postal-only variants, shown against the closest CAF case for scale (no target).
VARIANTS = [
    ("PingPong", "PingPongLowPower", "msgs_per_s"),
    ("RequestReply", "RequestReplyBlocking", "round_trips_per_s"),
    ("Spawn", "SpawnOnly", "spawns_per_s"),
    ("BytesPerIdleActor/100000", "BytesPerIdleRootActor/100000", "bytes_per_actor"),
    ("BytesPerIdleActor/1000000", "BytesPerIdleRootActor/1000000", "bytes_per_actor"),
]
NOISY_PERCENT = 10  # background CPU use above this is called out
SCHEDULER_COUNTERS = ["wakeups_per_msg", "sleeps", "steals", "rtt_p50_us", "rtt_p99_us",
                      "rtt_max_us"]
FLOOR_ROWS = [
    ("Fiber", "PingPong"),
    ("Fiber", "PingPong2Threads"),
    ("Postal", "PingPong1Thread"),
    ("Postal", "PingPong"),
    ("Postal", "PingPongLowPower"),
    ("Postal", "PingPongClient"),
    ("Postal", "PingPongClientLowPower"),
]
UNITS = {
    "msgs_per_s": "msgs/s",
    "round_trips_per_s": "round trips/s",
    "spawns_per_s": "spawns/s",
    "bytes_per_actor": "bytes/actor",
}


def case_key(name):
    """'BM_CafBytesPerIdleActor/100000/iterations:1/real_time' -> ('Caf', 'BytesPerIdleActor/100000')."""
    m = re.match(r"BM_(Caf|Postal|Fiber)(.*)", name)
    if not m:
        return None, None
    parts = [p for p in m.group(2).split("/")
             if p != "real_time" and not p.startswith("iterations:")]
    return m.group(1), "/".join(parts)


def load(results_dir):
    """{(side, case): {"values": {counter: [per run]}, "errors": [msg]}} plus the JSON contexts."""
    runs = {}
    contexts = []
    files = sorted(glob.glob(os.path.join(results_dir, "*.json")))
    if not files:
        sys.exit(f"bench_report: no JSON results in {results_dir}; run scripts/run-benchmarks.sh")
    for path in files:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            print(f"bench_report: skipping {path}: {e}", file=sys.stderr)
            continue
        contexts.append(data.get("context", {}))
        for b in data.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration":
                continue
            side, case = case_key(b.get("name", ""))
            if side is None:
                continue
            entry = runs.setdefault((side, case), {"values": {}, "errors": []})
            if b.get("error_occurred"):
                entry["errors"].append(f"{os.path.basename(path)}: {b.get('error_message', '?')}")
                continue
            for k, v in b.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    entry["values"].setdefault(k, []).append(float(v))
    return runs, contexts


def median(runs, side, case, counter):
    vals = runs.get((side, case), {}).get("values", {}).get(counter, [])
    return (statistics.median(vals), vals) if vals else (None, [])


def fmt(v, counter=None):
    if v is None:
        return "n/a"
    if counter == "bytes_per_actor":
        return f"{v:,.0f}"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.1f} k"
    if abs(v) >= 1 or v == 0:
        return f"{v:.0f}" if float(v).is_integer() else f"{v:.2f}"
    return f"{v:.2g}"


def ratio(caf, postal, counter):
    if caf is None or postal is None or caf == 0 or postal == 0:
        return None
    return caf / postal if counter == "bytes_per_actor" else postal / caf


def target_text(counter, target):
    if target is None:
        return "—"
    if counter == "bytes_per_actor":
        return "≤ CAF"
    return f"≥ {target:g}×"


def comparison_table(runs):
    rows = ["| workload | CAF | postal | ratio | target | met? |",
            "| --- | ---: | ---: | ---: | --- | --- |"]
    missing = []
    for caf_case, postal_case, counter, target in PAIRS:
        caf, _ = median(runs, "Caf", caf_case, counter)
        postal, _ = median(runs, "Postal", postal_case, counter)
        r = ratio(caf, postal, counter)
        if caf is None or postal is None:
            missing.append(postal_case)
        met = "—" if target is None or r is None else ("yes" if r >= target else "**no**")
        rows.append(f"| {postal_case} ({UNITS[counter]}) | {fmt(caf, counter)} | "
                    f"{fmt(postal, counter)} | {fmt_ratio(r)} | {target_text(counter, target)} | {met} |")
    for caf_case, postal_case, counter in VARIANTS:
        caf, _ = median(runs, "Caf", caf_case, counter)
        postal, _ = median(runs, "Postal", postal_case, counter)
        r = ratio(caf, postal, counter)
        rows.append(f"| *{postal_case}* (postal variant vs CAF {caf_case}; {UNITS[counter]}) | "
                    f"{fmt(caf, counter)} | {fmt(postal, counter)} | {fmt_ratio(r)} | — | — |")
    return rows, missing


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}×"


def runs_table(runs):
    rows = ["| case | counter | CAF runs | postal runs |", "| --- | --- | --- | --- |"]
    seen = set()
    for caf_case, postal_case, counter, *_ in PAIRS + VARIANTS:
        if postal_case in seen:
            continue
        seen.add(postal_case)
        _, caf_vals = median(runs, "Caf", caf_case, counter)
        _, postal_vals = median(runs, "Postal", postal_case, counter)
        caf_text = ", ".join(fmt(v, counter) for v in caf_vals) if caf_case == postal_case else "(above)"
        rows.append(f"| {postal_case} | {counter} | {caf_text or 'n/a'} | "
                    f"{', '.join(fmt(v, counter) for v in postal_vals) or 'n/a'} |")
    return rows


def scheduler_table(runs):
    rows = ["| postal case | " + " | ".join(SCHEDULER_COUNTERS) + " |",
            "| --- |" + " ---: |" * len(SCHEDULER_COUNTERS)]
    cases = sorted(case for side, case in runs if side == "Postal")
    for case in cases:
        meds = [median(runs, "Postal", case, c)[0] for c in SCHEDULER_COUNTERS]
        if all(m is None for m in meds):
            continue
        rows.append(f"| {case} | " + " | ".join(fmt(m) for m in meds) + " |")
    return rows


def floor_table(runs):
    """Ping-pong message rates next to the raw Boost.Fiber floor."""
    rows = ["| case | msgs/s | share of the one-thread floor |", "| --- | ---: | ---: |"]
    floor, _ = median(runs, "Fiber", "PingPong", "msgs_per_s")
    for side, case in FLOOR_ROWS:
        v, _ = median(runs, side, case, "msgs_per_s")
        share = "n/a" if v is None or not floor else f"{v / floor:.3g}×"
        rows.append(f"| {side}{case} | {fmt(v)} | {share} |")
    return rows


def load_background(results_dir):
    """{program run name: percent CPU busy before it} from run-benchmarks.sh's background.txt."""
    background = {}
    try:
        with open(os.path.join(results_dir, "background.txt")) as f:
            for line in f:
                name, _, busy = line.strip().rpartition(" ")
                if name and busy.isdigit():
                    background[name] = int(busy)
    except OSError:
        pass
    return background


def machine_lines(contexts, background):
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                                text=True, check=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    lines = [
        f"Measured {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} at commit `{commit}` "
        f"on {cpus} CPUs (nproc), `{model}`; {len(contexts)} program runs.",
    ]
    if background:
        busy = sorted(background.values())
        noisy = sorted(name for name, b in background.items() if b > NOISY_PERCENT)
        lines.append(f"Background CPU use in the 0.5 s before each program (none of ours running): "
                     f"{busy[0]}–{busy[-1]} %; "
                     + (f"above {NOISY_PERCENT} % (other work on the machine) before: "
                        f"{', '.join(noisy)}." if noisy else "quiet before every program."))
        reps = {}
        for name, b in background.items():
            m = re.search(r"-(r\d+)$", name)
            if m:
                reps.setdefault(m.group(1), []).append(b)
        if reps:
            lines.append("Background CPU use by repetition: " + "; ".join(
                f"{r}: {min(v)}–{max(v)} %" for r, v in sorted(reps.items())) + ".")
    return lines


def report(runs, contexts, background, every_run=True):
    lines = machine_lines(contexts, background)
    lines += ["", "Medians of the repetitions. Ratio: postal/CAF for rates, CAF/postal for bytes "
              "(above 1 is postal better either way).", ""]
    table, missing = comparison_table(runs)
    lines += table
    errors = [(side, case, e) for (side, case), v in sorted(runs.items()) for e in v["errors"]]
    if errors:
        lines += ["", "Errors reported by cases (left out of the medians):", ""]
        lines += [f"- BM_{side}{case}: {e}" for side, case, e in errors]
    if every_run:
        lines += ["", "### Every run", ""] + runs_table(runs)
    lines += ["", "### postal scheduler counters and round-trip times (medians over the timed loop)",
              ""]
    lines += scheduler_table(runs)
    lines += ["", "### Ping-pong against the Boost.Fiber floor", ""] + floor_table(runs)
    return lines, missing


def write_doc(path, lines):
    block = BEGIN + "\n" + "\n".join(lines) + "\n" + END
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="build/release/bench-results",
                    help="directory of Google Benchmark JSON files")
    ap.add_argument("--doc", default="docs/benchmarks.md",
                    help="markdown file whose bench markers receive the summary ('' to skip)")
    ap.add_argument("--out", default="",
                    help="markdown file that receives the whole report ('' to skip)")
    args = ap.parse_args()
    runs, contexts = load(args.results)
    background = load_background(args.results)
    lines, missing = report(runs, contexts, background)
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"\nbench_report: wrote {args.out}", file=sys.stderr)
    if args.doc:
        write_doc(args.doc, report(runs, contexts, background, every_run=False)[0])
        print(f"bench_report: wrote {args.doc}", file=sys.stderr)
    if missing:
        print(f"bench_report: no successful run for: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
