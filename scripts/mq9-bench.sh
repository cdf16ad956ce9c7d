#!/usr/bin/env bash
# mq9-bench.sh: the mq9 bridge (`postal mq9`) beside nats-server, the same libnats client program
# (nats_bench) against each, in one run (docs/benchmarks.md, "mq9 bridge").
#
#   nats         nats-server core: stream = publish/subscribe, round trip = request/responder
#   nats-js      nats-server JetStream (file storage): round trip = a publish acked once stored
#   mq9-mem      postal mq9, memory store: stream = MSG publishes stored then pushed to a live
#                subscriber; round trip = a MSG publish answered {"msg_id"} once stored
#   mq9-sqlite   the same on a SQLite store (durability os); the messages are normal priority,
#                so only `critical` would reach the file: the round trip uses .critical here
#   mq9-js       the same on the NATS store (JetStream on the nats-server above, file storage;
#                every priority is stored there), round trip on .critical like mq9-sqlite
#
# Usage: scripts/mq9-bench.sh [BUILD_DIR] [MESSAGES] [SIZE]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build/release}
MESSAGES=${2:-200000}
SIZE=${3:-64}
POSTAL=$BUILD/tools/postal
PEER=$BUILD/benchmarks/peers/nats_bench
for f in "$POSTAL" "$PEER"; do [[ -x $f ]] || { echo "mq9-bench: $f is not built (make build)" >&2; exit 1; }; done
command -v nats-server > /dev/null || { echo "mq9-bench: nats-server is not installed (scripts/install-deps.sh)" >&2; exit 1; }

WORK=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; wait 2> /dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_line() {  # FILE PATTERN: up to 20 s
  for _ in $(seq 200); do grep -q "$2" "$1" 2> /dev/null && return 0; sleep 0.1; done
  echo "mq9-bench: no \"$2\" in $1" >&2; cat "$1" >&2; exit 1
}

NATS_PORT=$(free_port)
nats-server -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$WORK/js" > "$WORK/nats.log" 2>&1 &
pids+=($!)
wait_line "$WORK/nats.log" "Server is ready"
"$POSTAL" mq9 --listen 127.0.0.1:0 > "$WORK/mem.log" 2>&1 &
pids+=($!)
wait_line "$WORK/mem.log" "mq9 bridge serving"
MEM_URL=$(grep -o 'nats://[0-9.:]*' "$WORK/mem.log" | head -1)
"$POSTAL" mq9 --listen 127.0.0.1:0 --store "$WORK/mq9.db" > "$WORK/sqlite.log" 2>&1 &
pids+=($!)
wait_line "$WORK/sqlite.log" "mq9 bridge serving"
SQLITE_URL=$(grep -o 'nats://[0-9.:]*' "$WORK/sqlite.log" | head -1)
"$POSTAL" mq9 --listen 127.0.0.1:0 --store "nats://127.0.0.1:$NATS_PORT" --nats-prefix MQ9BENCH \
  > "$WORK/js.log" 2>&1 &
pids+=($!)
wait_line "$WORK/js.log" "mq9 bridge serving"
JS_URL=$(grep -o 'nats://[0-9.:]*' "$WORK/js.log" | head -1)

common=(--size "$SIZE" --messages "$MESSAGES" --rtt-messages 5000)
"$PEER" --url "nats://127.0.0.1:$NATS_PORT" --label nats "${common[@]}"
"$PEER" --url "nats://127.0.0.1:$NATS_PORT" --label nats-js --jetstream 1 --rtt-subject postal.bench.js "${common[@]}"
"$PEER" --url "$MEM_URL" --label mq9-mem --mq9 1 "${common[@]}"
"$PEER" --url "$SQLITE_URL" --label mq9-sqlite --mq9 1 \
  --rtt-subject '$mq9.AI.MAILBOX.MSG.bench.rtt.critical' "${common[@]}"
"$PEER" --url "$JS_URL" --label mq9-js --mq9 1 \
  --rtt-subject '$mq9.AI.MAILBOX.MSG.bench.rtt.critical' "${common[@]}"
