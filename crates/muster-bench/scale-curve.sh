#!/usr/bin/env bash
# The scale curve (issue #23, target 6): members per group 10 / 100 / 1 000 / 10 000 against
# groups 1 / 1 000 / 100 000, the rebalance time and the server's memory for each, one fresh
# release musterd (redb store) per cell, and one markdown table of the results.
#
#   crates/muster-bench/scale-curve.sh [REPEATS]      (CAP=members the machine can drive)
#
# A cell of M members × G groups runs `muster-bench --spawn rebalance` with
# min(G, CAP / M) groups of M members (the "active" groups: they form, then all rejoin at
# once) and the rest of the G groups made Empty with one committed offset each first (as most
# groups of a large deployment are, most of the time): total members never pass CAP (default
# 20 000: the load generator's member tasks and sockets share this 2-core machine with the
# server). Figures per cell: formation last JoinGroup → last SyncGroup, all members told to
# rejoin → every group synced (p50 over REPEATS), and the server's RSS at the start, with the
# idle groups, and with every member Stable. JSON per cell in $OUT, the table on stdout.
set -euo pipefail

REPEATS=${1:-3}
CAP=${CAP:-20000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/target/bench-results/scale-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
cd "$ROOT"
cargo build --release -p muster-server --bin musterd -p muster-bench --bin muster-bench
RELEASE=${CARGO_TARGET_DIR:-$ROOT/target}/release
BENCH="$RELEASE/muster-bench --spawn --musterd $RELEASE/musterd --json"

for members in 10 100 1000 10000; do
    for groups in 1 1000 100000; do
        active=$((CAP / members))
        [ "$active" -gt "$groups" ] && active=$groups
        [ "$active" -lt 1 ] && active=1
        idle=$((groups - active))
        name="m${members}-g${groups}"
        echo "== $name: $active × $members members, $idle idle groups ($(uptime | sed 's/.*load average/load average/'))" >&2
        $BENCH rebalance --members "$members" --groups "$active" --idle-groups "$idle" \
            --repeats "$REPEATS" --no-leave --musterd-log "$OUT/$name.musterd.log" >"$OUT/$name.json"
    done
done

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
mib = lambda b: f"{b / 2**20:.0f}" if b else "—"
print("| members/group × groups | active groups × members (idle groups) | formation: last join → last sync | all rejoin: told → all synced | RSS start / with idle groups / formed (MiB) |")
print("|---|---|---|---|---|")
for members in (10, 100, 1000, 10000):
    for groups in (1, 1000, 100000):
        path = os.path.join(out, f"m{members}-g{groups}.json")
        if not os.path.exists(path):
            continue
        f = json.load(open(path))
        formed = f["rss_formed"][-1] if f["rss_formed"] else 0
        print(f"| {members} × {groups} | {f['groups']} × {members} ({f['idle_groups']}) "
              f"| {f['join_to_sync']['p50_ms']:.1f} ms | {f['rejoin_all']['p50_ms']:.1f} ms "
              f"| {mib(f['rss_start'])} / {mib(f['rss_idle_made'])} / {mib(formed)} |")
PY
echo "results in $OUT" >&2
