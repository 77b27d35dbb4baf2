#!/usr/bin/env bash
# Cluster mode's throughput figures, side by side on ONE etcd (docs/benchmarks.md "Cluster
# mode"): etcd's own batched puts and EtcdStore alone (muster-etcd's commit_throughput example),
# then durable OffsetCommits through three musterd nodes on that same etcd (muster-bench
# `commit`, each group's connection at its coordinator), then a 1 000-member rebalance on a
# cluster node and on a single node (redb).
#
#   crates/muster-bench/cluster-bench.sh [SECS]      # needs etcd: $MUSTER_ETCD_BIN or on PATH (apt-get install etcd-server)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-5}"
cargo build --release --locked -p muster-server --bin musterd -p muster-bench --bin muster-bench -p muster-cli --bin muster
cargo build --release --locked -p muster-etcd --features testkit --example commit_throughput
bin=${CARGO_TARGET_DIR:-target}/release
etcd=${MUSTER_ETCD_BIN:-etcd}
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
client_port=$(free_port); peer_port=$(free_port)
"$etcd" --name bench --data-dir "$work/etcd" \
    --listen-client-urls "http://127.0.0.1:$client_port" --advertise-client-urls "http://127.0.0.1:$client_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "bench=http://127.0.0.1:$peer_port" >"$work/etcd.log" 2>&1 &
pids+=($!)
endpoint="http://127.0.0.1:$client_port"
for _ in $(seq 100); do curl -fs "$endpoint/health" >/dev/null 2>&1 && break; sleep 0.1; done

echo "== etcd's own batched puts, and EtcdStore alone"
MUSTER_ETCD_ENDPOINTS="$endpoint" "$bin/examples/commit_throughput" "$secs"

echo "== durable OffsetCommits through 3 musterd nodes on the same etcd"
addrs=()
for i in 1 2 3; do
    port=$(free_port)
    "$bin/musterd" --cluster-etcd "$endpoint" --cluster-name cbench --node-id "n$i" \
        --listen "127.0.0.1:$port" --admin-listen off --initial-rebalance-delay-ms 0 --min-session-timeout-ms 100 --data-dir "$work/n$i" >"$work/n$i.log" 2>&1 &
    pids+=($!)
    addrs+=("127.0.0.1:$port")
done
for _ in $(seq 100); do
    n=$("$bin/muster" --server "${addrs[0]}" cluster describe --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(len(n["shards"]) for n in d["nodes"]) if len(d["nodes"])==3 else 0)' 2>/dev/null || echo 0)
    [[ "$n" == 64 ]] && break
    sleep 0.2
done
"$bin/muster-bench" --server "${addrs[0]}" commit --connections ${COMMIT_CONNECTIONS:-256} --partitions 1 --duration "$secs" ${COMMIT_ARGS:-}

[[ -n "${SKIP_REBALANCE:-}" ]] && exit 0
echo "== 1 000-member rebalance: a cluster node vs a single node"
"$bin/muster-bench" --server "${addrs[0]}" rebalance --members 1000 --repeats 3
port=$(free_port)
"$bin/musterd" --listen "127.0.0.1:$port" --admin-listen off --initial-rebalance-delay-ms 0 --min-session-timeout-ms 100 --data-dir "$work/single" >"$work/single.log" 2>&1 &
pids+=($!)
sleep 1
"$bin/muster-bench" --server "127.0.0.1:$port" rebalance --members 1000 --repeats 3
