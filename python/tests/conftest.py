"""Fixtures: a real ``musterd`` on ``127.0.0.1:0`` per test (as the Rust tests start it, see
crates/muster-client/tests/fleet/mod.rs), worker processes, and polling with a deadline.

The server binary is ``$MUSTER_BIN_DIR/musterd`` when that is set (``cargo xtask test`` sets
it), else the workspace's ``target/debug/musterd``, built with cargo when missing. Nothing is
skipped: a server that cannot be built or started fails the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, TypeVar

import pytest

import muster

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "python" / "examples"
T = TypeVar("T")

# Fast groups for tests: no initial rebalance delay, short sessions allowed (the members
# below use 1.5 s; the consumer protocol's session is the server's setting).
FAST_GROUPS = [
    "--initial-rebalance-delay-ms", "0",
    "--min-session-timeout-ms", "500",
    "--consumer-session-timeout-ms", "2000",
    "--consumer-heartbeat-interval-ms", "200",
]


def wait_until(
    what: str, check: Callable[[], Optional[T]], timeout: float = 20.0, every: float = 0.02
) -> T:
    """Polls ``check`` every ``every`` seconds until it returns something other than ``None``
    or ``False``; fails the test with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def _musterd_binary() -> Path:
    bin_dir = os.environ.get("MUSTER_BIN_DIR")
    binary = Path(bin_dir) / "musterd" if bin_dir else REPO / "target" / "debug" / "musterd"
    if not binary.exists():
        subprocess.run(
            ["cargo", "build", "--locked", "-p", "muster-server", "--bin", "musterd"],
            cwd=REPO,
            check=True,
        )
    if not binary.exists():
        pytest.fail(f"no musterd at {binary}")
    return binary


class Musterd:
    """``musterd`` on ``127.0.0.1:0``, its log in a file; killed at the end of the test."""

    def __init__(self, scratch: Path, flags: Sequence[str]) -> None:
        self.log = scratch / "musterd.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MUSTER_")}
        env["NO_COLOR"] = "1"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    str(_musterd_binary()),
                    "--listen", "127.0.0.1:0",
                    "--admin-listen", "off",
                    "--data-dir", str(scratch / "data"),
                    "--log-level", "info",
                    *flags,
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
            )
        self.addr: str = wait_until("musterd to listen", self._address, timeout=20)

    def _address(self) -> Optional[str]:
        if self.process.poll() is not None:
            pytest.fail(f"musterd exited ({self.process.returncode}):\n{self.log.read_text()}")
        for line in self.log.read_text(errors="replace").splitlines():
            if "musterd listening" in line:
                for word in line.split():
                    if word.startswith("local_addr="):
                        return word.split("=", 1)[1]
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def musterd(scratch: Path) -> Iterator[Musterd]:
    server = Musterd(scratch, FAST_GROUPS)
    yield server
    server.stop()


@pytest.fixture
def start_musterd(scratch: Path) -> Iterator[Callable[..., Musterd]]:
    """Starts a musterd with extra flags (TLS)."""
    servers: List[Musterd] = []

    def start(*flags: str) -> Musterd:
        server = Musterd(scratch, [*FAST_GROUPS, *flags])
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@dataclass
class OwnLine:
    at_us: int
    event: str
    epoch: int
    partitions: Dict[str, Optional[int]]


@dataclass
class Worker:
    """A worker process (examples/worker.py or a test script) and its output."""

    name: str
    process: "subprocess.Popen[bytes]"
    out: Path
    err: Path
    killed_at_us: Optional[int] = None

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def own_lines(self) -> List[OwnLine]:
        lines = []
        for line in self.text().splitlines():
            parts = line.split()
            if len(parts) == 5 and parts[0] == "own":
                listed: Dict[str, Optional[int]] = {}
                if parts[4] != "-":
                    for item in parts[4].split(","):
                        name, _, pos = item.partition("=")
                        listed[name] = int(pos) if pos else None
                lines.append(OwnLine(int(parts[1]), parts[2], int(parts[3]), listed))
        return lines

    def owned(self) -> Set[str]:
        """What the worker owns according to its last ``own`` lines."""
        owned: Set[str] = set()
        for line in self.own_lines():
            if line.event == "assigned":
                owned |= set(line.partitions)
            elif line.event in ("revoked", "lost", "stopped"):
                owned -= set(line.partitions)
        return owned

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: the worker stops processing at once, without a word (its ownership
        ends now for the replay below)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.killed_at_us = int(time.time() * 1_000_000)

    def wait_exit(self, timeout: float = 20) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} did not exit:\n{self.text()}\n{self.err.read_text()}")

    def describe(self) -> str:
        return f"--- {self.name} stdout\n{self.text()}\n--- stderr\n{self.err.read_text()}"


@pytest.fixture
def workers(scratch: Path) -> Iterator[Callable[..., Worker]]:
    """Starts worker processes (``python examples/worker.py ...`` by default); kills what is
    left at the end of the test."""
    started: List[Worker] = []

    def start(name: str, args: Sequence[str], script: Optional[Path] = None) -> Worker:
        out = scratch / f"{name}.out"
        err = scratch / f"{name}.err"
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        with open(out, "wb") as o, open(err, "wb") as e:
            process = subprocess.Popen(
                [sys.executable, str(script or EXAMPLES / "worker.py"), "--name", name, *args],
                stdout=o,
                stderr=e,
                env=env,
                # Ctrl-C reaches the worker as a KeyboardInterrupt even when the tests run
                # with SIGINT ignored (a background job of a non-interactive shell): Python
                # installs its handler only where SIGINT is not ignored at startup.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
        worker = Worker(name, process, out, err)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGKILL)
            worker.process.wait()


def all_partitions(topic: str, count: int) -> Set[str]:
    return {f"{topic}/{p}" for p in range(count)}


def no_partition_had_two_owners(workers: Sequence[Worker]) -> None:
    """Replays the workers' ``own`` lines (stamped with the shared wall clock) and fails if
    a partition was owned by two workers at once."""
    events = []
    for w in workers:
        for line in w.own_lines():
            if line.event in ("assigned", "revoked", "lost", "stopped"):
                for p in line.partitions:
                    kind = 1 if line.event == "assigned" else 0
                    events.append((line.at_us, kind, w.name, line.event, p))
        if w.killed_at_us is not None:
            for p in w.owned():
                events.append((w.killed_at_us, 0, w.name, "killed", p))
    # At the same microsecond, releases come before acquisitions.
    events.sort()
    owner: Dict[str, str] = {}
    for at, _, name, event, p in events:
        if event == "assigned":
            assert p not in owner, f"{p} assigned to {name} at {at} while {owner[p]} owned it"
            owner[p] = name
        elif owner.get(p) == name:
            del owner[p]


@pytest.fixture
def admin(musterd: Musterd) -> muster.Admin:
    return muster.Admin(musterd.addr)
