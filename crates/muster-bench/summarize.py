#!/usr/bin/env python3
"""Medians over the runs that run-all.sh left in a results directory.

    python3 crates/muster-bench/summarize.py target/bench-results/<run>

For each scenario (files NAME.<i>.json), prints the median over runs of each headline figure,
with the individual runs in brackets.
"""
import glob
import json
import os
import statistics
import sys


def get(doc, path):
    for key in path.split("."):
        if doc is None:
            return None
        doc = doc.get(key)
    return doc


FIGURES = {
    "rebalance": [
        ("last join -> last sync p50 (ms)", "join_to_sync.p50_ms"),
        ("last join -> last sync max (ms)", "join_to_sync.max_ms"),
        ("first join -> last sync p50 (ms)", "formation_total.p50_ms"),
        ("leave -> settled p50 (ms)", "leave_settle.p50_ms"),
        ("leave -> last member told p50 (ms)", "leave_detection.p50_ms"),
        ("after leave: last join -> last sync p50 (ms)", "leave_join_to_sync.p50_ms"),
    ],
    "heartbeat": [
        ("musterd heartbeats/s", "muster.per_second"),
        ("musterd p50 (us)", "muster.latency.p50_us"),
        ("musterd p99 (us)", "muster.latency.p99_us"),
        ("musterd p99.9 (us)", "muster.latency.p999_us"),
        ("echo heartbeats/s", "echo.per_second"),
        ("echo p50 (us)", "echo.latency.p50_us"),
        ("echo p99 (us)", "echo.latency.p99_us"),
        ("musterd / echo", "ratio"),
    ],
    "security": [
        ("open heartbeats/s", "per_second.open"),
        ("token heartbeats/s", "per_second.token"),
        ("tls heartbeats/s", "per_second.tls"),
        ("mtls heartbeats/s", "per_second.mtls"),
        ("token / open", "token_ratio"),
        ("tls / token", "tls_ratio"),
        ("mtls / token", "mtls_ratio"),
    ],
    "commit": [
        ("commits/s", "commits_per_second"),
        ("partition offsets/s", "partition_offsets_per_second"),
        ("p50 (us)", "latency.p50_us"),
        ("p99 (us)", "latency.p99_us"),
        ("failed", "failed"),
    ],
    "idle": [
        ("bytes per connection", "bytes_per_connection"),
        ("bytes per group with one member", "bytes_per_group_with_one_member"),
        ("bytes per member", "bytes_per_member"),
        ("bytes per group", "bytes_per_group"),
        ("bytes per member, all in", "bytes_per_member_all_in"),
    ],
    "one-join-compare": [
        ("redb: last join -> last sync p50 (ms)", "redb.all.p50_ms"),
        ("memory: last join -> last sync p50 (ms)", "memory.all.p50_ms"),
        ("etcd: put -> last watcher p50 (ms)", "etcd_watch.all.p50_ms"),
        ("etcd: put -> answered p50 (ms)", "etcd_put.all.p50_ms"),
        ("redb / etcd-watch", "redb_ratio"),
        ("memory / etcd-watch", "memory_ratio"),
    ],
    "expiry": [
        ("deadline -> gone p50 (ms)", "describe_lateness.p50_ms"),
        ("deadline -> gone max (ms)", "describe_lateness.max_ms"),
        ("deadline -> survivor told p50 (ms)", "survivor_lateness.p50_ms"),
    ],
}


def hostile(docs):
    """Per phase of each run: victim heartbeat latency, server memory, what the attack got."""
    for doc in docs:
        print(f"  baseline RSS {doc.get('baseline_rss_mib') or 0:.0f} MiB, "
              f"watchdog at {doc.get('rss_limit_mib') or 0:.0f} MiB, restarts {doc.get('restarts')}")
        print(f"  {'phase':12} {'hb p50 ms':>9} {'hb p99 ms':>9} {'hb max ms':>9} {'hb err':>6} "
              f"{'RSS peak':>8} {'over base':>9}  server / attack")
        for p in doc.get("phases", []):
            lat = get(p, "victim.latency") or {}
            errors = sum((get(p, "victim.errors") or {}).values())
            if p.get("killed_by_watchdog_at_mib"):
                server = f"KILLED at {p['killed_by_watchdog_at_mib']:.0f} MiB"
            elif not p.get("alive"):
                server = "DEAD"
            elif not p.get("responsive"):
                server = "UNRESPONSIVE"
            else:
                server = "ok"
            attack = p.get("attack")
            if attack:
                answers = ", ".join(f"{k} {v}" for k, v in sorted(attack.get("answers", {}).items()))
                extra = ", ".join(f"{k} {v}" for k, v in sorted(attack.get("extra", {}).items()))
                server += (f"; sent {attack.get('sent')}, disconnects {attack.get('disconnects')}, "
                           f"connect failures {attack.get('connect_failures')}, "
                           f"stalls {attack.get('stalls')}; {answers}; {extra}")
            if p.get("restarted"):
                server += " (restarted after)"
            num = lambda v: f"{v:.0f}" if isinstance(v, (int, float)) else "-"
            print(f"  {p['name']:12} {lat.get('p50_us', 0) / 1e3:9.2f} {lat.get('p99_us', 0) / 1e3:9.2f} "
                  f"{lat.get('max_us', 0) / 1e3:9.1f} {errors:6d} {num(p.get('rss_peak_mib')):>8} "
                  f"{num(p.get('rss_peak_over_baseline_mib')):>9}  {server}")


def join_one(docs):
    """Per protocol and change, over every repeat of every run: medians [min-max]."""
    def span(values):
        values = [v for v in values if isinstance(v, (int, float))]
        if not values:
            return "-"
        return f"{statistics.median(values):.4g} [{min(values):.4g}-{max(values):.4g}]"

    sides = {}
    for doc in docs:
        for side in doc.get("sides", []):
            sides.setdefault(side["protocol"], []).append(side)
    for protocol, runs in sides.items():
        print(f"  {protocol} (heartbeat interval {runs[0].get('heartbeat_interval_ms')} ms)")
        for phase in ("join", "leave"):
            figures = [r[phase] for r in runs if r.get(phase)]
            if not figures:
                continue
            changes = [c for f in figures for c in f.get("changes", [])]
            rows = [
                ("subject: first request -> owns its share (ms)", [c["subject_ms"] for c in changes]),
                ("start -> every partition owned again (ms)", [c["all_owned_ms"] for c in changes]),
                ("start -> settled (ms)", [c["settled_ms"] for c in changes]),
                ("partitions stopped", [c["stopped"] for c in changes]),
                ("partitions moved", [c["moved"] for c in changes]),
                ("others that lost a partition", [c["others_lost"] for c in changes]),
                ("others that did more than heartbeat", [c["others_acted"] for c in changes]),
                ("uninvolved others that lost", [c["uninvolved_lost"] for c in changes]),
                ("others' heartbeat p99 during the change (ms)",
                 [h["p99_us"] / 1e3 for f in figures for h in f.get("heartbeats", [])]),
                ("others' heartbeat max during the change (ms)",
                 [h["max_us"] / 1e3 for f in figures for h in f.get("heartbeats", [])]),
                ("stop -> owned again p50 (ms)",
                 [d["p50_us"] / 1e3 for f in figures for d in f.get("downtime", []) if d["count"]]),
            ]
            if phase == "leave":
                rows = rows[1:]
            print(f"    {phase} ({len(changes)} changes)")
            for label, values in rows:
                print(f"      {label:47} {span(values)}")
        base = [h["p99_us"] / 1e3 for r in runs for h in r.get("baseline_heartbeats", [])]
        print(f"    {'baseline heartbeat p99 (ms)':51} {span(base)}")


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "."
    names = sorted({os.path.basename(p).rsplit(".", 2)[0] for p in glob.glob(f"{directory}/*.json")})
    for name in names:
        docs = []
        for path in sorted(glob.glob(f"{directory}/{name}.*.json")):
            with open(path) as f:
                docs.append(json.load(f))
        scenario = docs[0].get("scenario", "")
        print(f"## {name} ({len(docs)} runs)")
        if scenario == "hostile":
            hostile(docs)
            print()
            continue
        if scenario == "join-one":
            join_one(docs)
            print()
            continue
        for label, path in FIGURES.get(scenario, []):
            values = [get(d, path) for d in docs]
            values = [v for v in values if isinstance(v, (int, float))]
            if not values:
                continue
            runs = ", ".join(f"{v:.4g}" for v in values)
            print(f"  {label:45} {statistics.median(values):12.4g}   [{runs}]")
        print()


if __name__ == "__main__":
    main()
