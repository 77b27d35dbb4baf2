#!/usr/bin/env bash
# Runs every muster-bench scenario against a freshly started release musterd, RUNS times each,
# and leaves one JSON document per run in $OUT (default target/bench-results/<timestamp>).
# docs/benchmarks.md reports the medians of these runs.
#
#   crates/muster-bench/run-all.sh [RUNS]          (ONLY=regex to run some scenarios)
#
# The server is started with exactly the flags below; each scenario gets a fresh server (and a
# fresh data directory) so that one run's state does not weigh on the next.
set -euo pipefail

RUNS=${1:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/target/bench-results/$(date +%Y%m%d-%H%M%S)}
ADDR=127.0.0.1:17450
DATA=$(mktemp -d /tmp/muster-bench-data.XXXXXX)
mkdir -p "$OUT"
ulimit -n 65536 2>/dev/null || true

cd "$ROOT"
cargo build --release -p muster-server --bin musterd -p muster-bench --bin muster-bench
MUSTERD=$ROOT/target/release/musterd
BENCH="$ROOT/target/release/muster-bench --server $ADDR --json"

PID=
start_server() {
    stop_server
    rm -rf "$DATA" && mkdir -p "$DATA"
    "$MUSTERD" --listen "$ADDR" --admin-listen off --data-dir "$DATA" \
        --initial-rebalance-delay-ms 0 --min-session-timeout-ms 100 \
        >"$OUT/musterd.log" 2>&1 &
    PID=$!
    for _ in $(seq 50); do
        grep -q "listening" "$OUT/musterd.log" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "musterd did not start" >&2
    exit 1
}
stop_server() {
    if [ -n "$PID" ]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
        PID=
    fi
}
trap 'stop_server; rm -rf "$DATA"' EXIT

run() { # name, args...
    local name=$1
    shift
    # ONLY=regex runs only the scenarios whose name matches.
    if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return 0; fi
    for i in $(seq "$RUNS"); do
        echo "== $name run $i ($(uptime | sed 's/.*load average/load average/'))"
        start_server
        $BENCH "$@" --pid "$PID" >"$OUT/$name.$i.json"
    done
}

run rebalance-1000x1 rebalance --members 1000 --groups 1 --repeats 5
run rebalance-10000x1 rebalance --members 10000 --groups 1 --repeats 3
run rebalance-10x1000 rebalance --members 10 --groups 1000 --repeats 3
run heartbeat heartbeat --connections 64 --pipeline 16 --duration 10 --warmup 2 --compare-echo
run heartbeat-p1 heartbeat --connections 64 --pipeline 1 --duration 10 --warmup 2 --compare-echo
run commit commit --connections 16 --partitions 10 --duration 10 --warmup 1
run idle-1000x10 idle --groups 1000 --members 10
run idle-10000x1 idle --groups 10000 --members 1
run expiry expiry --members 3 --session-timeout-ms 1000 --repeats 10
echo "results in $OUT"
