#!/usr/bin/env bash
# Runs every muster-bench scenario against a freshly started release musterd, RUNS times each,
# and leaves one JSON document per run in $OUT (default target/bench-results/<timestamp>),
# with the server's log beside it (NAME.<i>.musterd.log).
# docs/benchmarks.md reports the medians of these runs; summarize.py prints them, and the
# table of issue #23's targets against their baselines of the same run.
#
#   crates/muster-bench/run-all.sh [RUNS]          (ONLY=regex to run some scenarios)
#
# Each run is `muster-bench --spawn`: the bench starts the release musterd as a child process
# (127.0.0.1:0, a fresh temporary data directory, the flags listed in `muster-bench --help`
# under --spawn), reads the server's own memory for `idle`, and kills it at the end, so that one
# run's state does not weigh on the next.
set -euo pipefail

RUNS=${1:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/target/bench-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
ulimit -n 65536 2>/dev/null || true

cd "$ROOT"
cargo build --release -p muster-server --bin musterd -p muster-bench --bin muster-bench
RELEASE=${CARGO_TARGET_DIR:-$ROOT/target}/release
BENCH="$RELEASE/muster-bench --spawn --musterd $RELEASE/musterd --json"

run() { # name, args...
    runs "$RUNS" "$@"
}

runs() { # times, name, args...
    local times=$1 name=$2
    shift 2
    # ONLY=regex runs only the scenarios whose name matches.
    if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return 0; fi
    for i in $(seq "$times"); do
        echo "== $name run $i ($(uptime | sed 's/.*load average/load average/'))"
        $BENCH "$@" --musterd-log "$OUT/$name.$i.musterd.log" >"$OUT/$name.$i.json"
    done
}

run rebalance-1000x1 rebalance --members 1000 --groups 1 --repeats 5
run rebalance-10000x1 rebalance --members 10000 --groups 1 --repeats 3
run rebalance-10x1000 rebalance --members 10 --groups 1000 --repeats 3
run heartbeat heartbeat --connections 64 --pipeline 16 --duration 10 --warmup 2 --compare-echo
run heartbeat-p1 heartbeat --connections 64 --pipeline 1 --duration 10 --warmup 2 --compare-echo
# Open, token, TLS and mTLS servers, one after the other in each run (issue #12's targets).
run security security --connections 64 --pipeline 16 --duration 10 --warmup 2
run security-p1 security --connections 64 --pipeline 1 --duration 10 --warmup 2
run commit commit --connections 16 --partitions 10 --duration 10 --warmup 1
run idle-1000x10 idle --groups 1000 --members 10
run idle-10000x1 idle --groups 10000 --members 1
# Issue #23: Empty groups loaded with an actor each, then parked (3 alternating restarts each
# within one run: one run is enough).
runs 1 parked-10000 parked --groups 10000 --rounds 3
runs 1 parked-50000 parked --groups 50000 --rounds 3
# The target's own size (≤ 512 B per group, ≤ 1 GiB, restart ≤ 5 s): ~1 minute, ~3.2 GiB RSS
# while the groups are loaded live.
runs 1 parked-1000000 parked --groups 1000000 --rounds 1
run expiry expiry --members 3 --session-timeout-ms 1000 --repeats 10
# Issue #21: one member joins (then one leaves), classic and consumer protocol side by side;
# the spawned server gets --consumer-heartbeat-interval-ms from --heartbeat-ms.
run join-one-1000 join-one --members 1000 --partitions 10000 --protocol both --repeats 3 --heartbeat-ms 500
run join-one-10x900 join-one --members 10 --partitions 900 --protocol both --repeats 5 --heartbeat-ms 500
# Issue #23: one member joins 1 000 (10 000) members, redb and memory stores against a bare
# etcd telling as many watchers about one put, alternating in each run (etcd: $MUSTER_ETCD_BIN
# or etcd on PATH).
run one-join-1000 one-join --members 1000 --repeats 5 --compare --rounds 3
run one-join-10000 one-join --members 10000 --repeats 3 --compare --rounds 2
# Issue #23 target 5: failover, 10 SIGKILLs at lease TTL 5 s with each one's timeline (the
# example's text, not JSON). The 10-minute false-failover soak is not run here:
# target/release/examples/cluster_soak 600 5.
if [ -z "${ONLY:-}" ] || [[ failover =~ $ONLY ]]; then
    cargo build --release -p muster-server --example cluster_failover
    echo "== failover ($(uptime | sed 's/.*load average/load average/'))"
    MUSTERD="$RELEASE/musterd" "$RELEASE/examples/cluster_failover" 10 5 >"$OUT/failover.txt"
fi
# Issue #23 target 4: durable OffsetCommits through three cluster nodes against etcd's own
# batched puts on the same etcd (text: cluster-bench.sh's output), and target 6: the scale
# curve (its own JSON per cell under scale/, the table in scale.txt).
if [ -z "${ONLY:-}" ] || [[ cluster =~ $ONLY ]]; then
    echo "== cluster ($(uptime | sed 's/.*load average/load average/'))"
    SKIP_REBALANCE=1 crates/muster-bench/cluster-bench.sh 10 >"$OUT/cluster.txt" ||
        echo "cluster bench failed: see $OUT/cluster.txt" >&2
fi
if [ -z "${ONLY:-}" ] || [[ scale =~ $ONLY ]]; then
    echo "== scale ($(uptime | sed 's/.*load average/load average/'))"
    OUT="$OUT/scale" crates/muster-bench/scale-curve.sh 1 >"$OUT/scale.txt" ||
        echo "scale curve failed: see $OUT/scale.txt" >&2
fi
# One run: its figures are per attack, not medians. Each attack meets a fresh server; a
# watchdog kills the server at 4 GiB RSS.
runs 1 hostile hostile --groups 50 --members 4 --phase 5 --fresh-server
# Issue #24: the TLS handshake flood, against a server spawned with TLS.
runs 1 hostile-tls hostile --groups 50 --members 4 --phase 5 --tls
echo "results in $OUT"
