#!/usr/bin/env bash
# run-fuzzers.sh: run every libFuzzer program in the fuzz build for FUZZ_SECONDS seconds each,
# one after the other. A crash, leak or timeout fails the script; the input that caused it is
# saved under $FUZZ_BUILD/artifacts/. Each fuzzer keeps its corpus in $FUZZ_BUILD/corpus/<name>
# and also reads the checked-in seeds in fuzz/corpus/<name> if that folder exists (never writes
# to it). Exits 0 with a message if there are no fuzzers yet.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZ_BUILD=${FUZZ_BUILD:-build/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}

mapfile -t fuzzers < <(find "$FUZZ_BUILD/fuzz" -maxdepth 1 -type f -perm -u+x 2>/dev/null | sort)
if ((${#fuzzers[@]} == 0)); then
  echo "run-fuzzers: no fuzzer programs in $FUZZ_BUILD/fuzz; nothing to run."
  exit 0
fi

mkdir -p "$FUZZ_BUILD/artifacts"
for fuzzer in "${fuzzers[@]}"; do
  name=$(basename "$fuzzer")
  corpus="$FUZZ_BUILD/corpus/$name"
  mkdir -p "$corpus"
  dirs=("$corpus")
  [[ -d "fuzz/corpus/$name" ]] && dirs+=("fuzz/corpus/$name")
  echo "=== $name: ${FUZZ_SECONDS}s"
  "$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$FUZZ_BUILD/artifacts/$name-" "${dirs[@]}"
done
