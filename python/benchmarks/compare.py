"""The Python client against the Rust client, in one run: heartbeats and commits per second
with many members in one process (docs/benchmarks.md, "The Python client").

Starts one ``musterd`` (``--admin-listen`` on, for its ``/metrics``), then for each load
runs the Rust driver (crates/muster-client/examples/members_load.rs) and the Python driver
(members_load.py) in turn, alternating, against it. Each driver joins its members (groups of
its own), says READY; after a warm-up the server's request counters and the driver's CPU time
are read at the start and the end of the measured window. Heartbeats and commits are counted
by the server (``muster_requests_total``, answered without error), so both clients are
measured the same way.

    python python/benchmarks/compare.py --musterd target/debug/musterd \\
        --rust-driver target/debug/examples/members_load --python .../bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent


def metrics(admin: str) -> Dict[Tuple[str, str], float]:
    text = urllib.request.urlopen(f"http://{admin}/metrics", timeout=10).read().decode()
    counts: Dict[Tuple[str, str], float] = {}
    for line in text.splitlines():
        m = re.match(r'muster_requests_total\{(.*)\} ([0-9.e+]+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        key = (labels.get("request", ""), labels.get("error", ""))
        counts[key] = counts.get(key, 0.0) + float(m.group(2))
    return counts


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_musterd(binary: str, scratch: Path) -> Tuple[subprocess.Popen[bytes], str, str]:
    log = scratch / "musterd.log"
    server = subprocess.Popen(
        [binary, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
         "--data-dir", str(scratch / "data"), "--log-level", "warn,musterd=info,muster_server=info",
         "--initial-rebalance-delay-ms", "0", "--max-connections", "100000"],
        stdout=subprocess.DEVNULL, stderr=open(log, "wb"),
        env={k: v for k, v in os.environ.items() if not k.startswith("MUSTER_")},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if "musterd listening" in line:
                words = dict(w.split("=", 1) for w in line.split() if "=" in w)
                return server, words["local_addr"], words["admin_addr"]
        if server.poll() is not None:
            sys.exit(f"musterd exited:\n{log.read_text()}")
        time.sleep(0.05)
    sys.exit("musterd did not start")


def run(
    label: str, command: List[str], admin: str, warmup: float, window: float, out: Path
) -> Dict[str, object]:
    driver = subprocess.Popen(command, stdout=open(out, "wb"), stderr=subprocess.STDOUT)
    started = time.monotonic()
    while "READY" not in out.read_text(errors="replace"):
        if driver.poll() is not None or time.monotonic() - started > 600:
            driver.kill()
            sys.exit(f"{label}: no READY:\n{out.read_text()}")
        time.sleep(0.1)
    joined = time.monotonic() - started
    time.sleep(warmup)
    m0, c0, t0 = metrics(admin), cpu_seconds(driver.pid), time.monotonic()
    time.sleep(window)
    m1, c1, t1 = metrics(admin), cpu_seconds(driver.pid), time.monotonic()
    rss = rss_mib(driver.pid)
    driver.send_signal(signal.SIGTERM)
    driver.wait(120)
    elapsed = t1 - t0

    def rate(request: str, error: str = "NONE") -> float:
        return (m1.get((request, error), 0.0) - m0.get((request, error), 0.0)) / elapsed

    errors = sum(v - m0.get(k, 0.0) for k, v in m1.items() if k[1] != "NONE")
    return {
        "client": label,
        "heartbeats_per_s": round(rate("Heartbeat"), 1),
        "commits_per_s": round(rate("OffsetCommit"), 1),
        "errors_in_window": errors,
        "client_cpu_percent": round(100 * (c1 - c0) / elapsed, 1),
        "client_rss_mib": round(rss, 1),
        "join_s": round(joined, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--musterd", required=True)
    p.add_argument("--rust-driver", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--groups", type=int, default=100)
    p.add_argument("--members", type=int, default=10)
    p.add_argument("--warmup", type=float, default=5)
    p.add_argument("--window", type=float, default=20)
    p.add_argument("--commit-intervals-ms", default="1000,0",
                   help="the loads: a commit per member every N ms (0: back to back)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="muster-pybench-"))
    server, addr, admin = start_musterd(args.musterd, scratch)
    results = []
    try:
        for interval in [int(i) for i in args.commit_intervals_ms.split(",")]:
            for label, program in (
                ("rust", [args.rust_driver]),
                ("python", [args.python, str(HERE / "members_load.py")]),
            ):
                prefix = f"{label}-{interval}"
                command = [
                    *program, "--server", addr, "--groups", str(args.groups),
                    "--members", str(args.members), "--group-prefix", prefix,
                    "--commit-interval-ms", str(interval),
                ]
                result = run(label, command, admin, args.warmup, args.window,
                             scratch / f"{prefix}.out")
                result["commit_interval_ms"] = interval
                result["members"] = args.groups * args.members
                results.append(result)
                print(json.dumps(result), file=sys.stderr, flush=True)
    finally:
        server.kill()
        server.wait()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'load':>22} {'client':>7} {'heartbeats/s':>13} {'commits/s':>10} {'CPU %':>7} {'RSS MiB':>8}")
    for r in results:
        load = "back-to-back commits" if r["commit_interval_ms"] == 0 else f"commit every {r['commit_interval_ms']} ms"
        print(f"{load:>22} {r['client']:>7} {r['heartbeats_per_s']:>13} {r['commits_per_s']:>10} "
              f"{r['client_cpu_percent']:>7} {r['client_rss_mib']:>8}")


if __name__ == "__main__":
    main()
