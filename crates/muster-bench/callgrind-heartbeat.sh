#!/usr/bin/env bash
# Instructions per heartbeat, which the machine's load does not change (docs/benchmarks.md,
# "Security"): a release musterd under `valgrind --tool=callgrind`, open or with an auth file,
# the bench's heartbeat load (8 connections x 16 in flight) for SECONDS, a graceful stop, and
# the total instructions. Run it for two durations per mode: (Ir2 - Ir1) / (ok2 - ok1) is the
# marginal cost of one heartbeat.
#
#   crates/muster-bench/callgrind-heartbeat.sh open|token SECONDS
#
# Needs valgrind and `cargo build --release -p muster-server --bin musterd -p muster-bench`.
set -euo pipefail
MODE=$1; D=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
R=${CARGO_TARGET_DIR:-$ROOT/target}/release
W=$(mktemp -d)
TOKEN=cg-bench-token
ARGS=()
if [ "$MODE" = token ]; then
  H=$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)
  cat > "$W/auth.toml" <<TOML
[[principals]]
name = "bench"
token_sha256 = "$H"
[[acls]]
principal = "bench"
resource = "group"
pattern = "bench-*"
operations = ["read"]
[[acls]]
principal = "bench"
resource = "topic"
pattern = "bench-*"
operations = ["read", "create"]
TOML
  ARGS=(--auth-file "$W/auth.toml")
fi
valgrind --tool=callgrind --callgrind-out-file="$W/cg.out" "$R/musterd" --listen 127.0.0.1:0 \
  --data-dir "$W/data" --admin-listen off --initial-rebalance-delay-ms 0 --log-format text \
  --log-level info "${ARGS[@]}" 2> "$W/log" &
PID=$!
for i in $(seq 600); do grep -q "musterd listening" "$W/log" && break; sleep 0.1; done
ADDR=$(grep "musterd listening" "$W/log" | grep -o 'local_addr=[^ ]*' | cut -d= -f2)
TOK=()
[ "$MODE" = token ] && TOK=(--token "$TOKEN")
"$R/muster-bench" --server "$ADDR" "${TOK[@]}" --json heartbeat --connections 8 --pipeline 16 \
  --duration "$D" --warmup 0 > "$W/bench.json"
kill -TERM $PID; wait $PID || true
OK=$(python3 -c "import json;print(json.load(open('$W/bench.json'))['muster']['ok'])")
IR=$(grep -E '^(summary|totals):' "$W/cg.out" | head -1 | awk '{print $2}')
echo "$MODE $D ok=$OK ir=$IR"
