"""Worker processes (examples/worker.py) sharing a topic through a real musterd, as the Rust
workers do: one killed with -9 and its partitions taken over, a cooperative hand-over that
loses no partition and no commit, and Ctrl-C while a rebalance waits for the worker."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

import muster

from conftest import (
    Musterd,
    Worker,
    all_partitions,
    no_partition_had_two_owners,
    wait_until,
)

TOPIC = "jobs"
PARTITIONS = 6


def args(server: Musterd, *extra: str, session_ms: int = 1500, protocol: str = "classic") -> List[str]:
    return [
        "--server", server.addr,
        "--topics", TOPIC,
        "--partitions", str(PARTITIONS),
        "--group-protocol", protocol,
        "--session-timeout-ms", str(session_ms),
        "--heartbeat-interval-ms", "100",
        "--commit-interval-ms", "100",
        "--ownership-log",
        *extra,
    ]


def shared_by(live: Sequence[Worker]) -> bool:
    """Every partition owned, each by one of ``live``."""
    owned = [w.owned() for w in live]
    union = set().union(*owned)
    return union == all_partitions(TOPIC, PARTITIONS) and sum(map(len, owned)) == PARTITIONS


def every_owner_started_where_the_last_stopped(workers: Sequence[Worker]) -> None:
    """No acknowledged commit was lost: each assignment starts at or after the last offset
    committed for that partition before it (wall-clock order across processes)."""
    lines = sorted(
        ((line.at_us, line.event, w.name, line.partitions) for w in workers for line in w.own_lines()),
        key=lambda x: x[0],
    )
    last: Dict[str, int] = {}
    for at, event, name, partitions in lines:
        for p, position in partitions.items():
            if event == "committed" and position is not None:
                last[p] = max(last.get(p, 0), position)
            elif event == "assigned" and position is not None:
                assert position >= last.get(p, 0), (
                    f"{name} started {p} at {position} at {at}, but {last[p]} was committed"
                )


def test_a_worker_killed_with_minus_9_is_taken_over(musterd: Musterd, workers, admin: muster.Admin) -> None:  # type: ignore[no-untyped-def]
    admin.ensure_topic(TOPIC, PARTITIONS)
    fleet = [workers(name, args(musterd)) for name in ("w1", "w2", "w3")]
    wait_until("three workers sharing the topic", lambda: shared_by(fleet) and all(w.owned() for w in fleet))
    victim = fleet[1]
    orphaned = victim.owned()
    victim.kill()
    survivors = [fleet[0], fleet[2]]
    wait_until("the survivors to take over", lambda: shared_by(survivors), timeout=30)
    assert orphaned <= survivors[0].owned() | survivors[1].owned()
    no_partition_had_two_owners(fleet)
    every_owner_started_where_the_last_stopped(fleet)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_cooperative_hand_over_loses_no_partition(
    musterd: Musterd, workers, admin: muster.Admin, protocol: str  # type: ignore[no-untyped-def]
) -> None:
    admin.ensure_topic(TOPIC, PARTITIONS)
    # A long session: a hand-over that completes in time can only come from clean leaving.
    slow_expiry = dict(session_ms=60_000, protocol=protocol)
    w1 = workers("w1", args(musterd, **slow_expiry))  # type: ignore[arg-type]
    w2 = workers("w2", args(musterd, **slow_expiry))  # type: ignore[arg-type]
    wait_until("two workers sharing", lambda: shared_by([w1, w2]) and w1.owned() and w2.owned())
    w3 = workers("w3", args(musterd, **slow_expiry))  # type: ignore[arg-type]
    wait_until("three workers sharing", lambda: shared_by([w1, w2, w3]) and w3.owned())
    w1.signal(signal.SIGTERM)
    assert w1.wait_exit() == 0, w1.describe()
    assert "left" in w1.text()
    wait_until("w2 and w3 to take over", lambda: shared_by([w2, w3]), timeout=15)
    fleet = [w1, w2, w3]
    no_partition_had_two_owners(fleet)
    every_owner_started_where_the_last_stopped(fleet)
    if protocol == "classic":
        # Cooperative: partitions that did not move were never revoked.
        assert all(line.event != "lost" for w in fleet for line in w.own_lines()), [w.describe() for w in fleet]


def test_ctrl_c_during_a_rebalance(musterd: Musterd, workers, admin: muster.Admin) -> None:  # type: ignore[no-untyped-def]
    admin.ensure_topic(TOPIC, PARTITIONS)
    script = Path(__file__).with_name("slow_revoke_worker.py")
    w1 = workers("w1", args(musterd, session_ms=60_000), script=script)
    wait_until("w1 to own everything", lambda: shared_by([w1]))
    w2 = workers("w2", args(musterd, session_ms=60_000))
    # w2's join makes w1 give up half: the rebalance now waits for w1's revocation callback.
    wait_until("w1 in its revocation callback", lambda: "REVOKING" in w1.text())
    w1.signal(signal.SIGINT)
    assert w1.wait_exit() == 0, w1.describe()
    out = w1.text()
    assert "shutting down: committing and leaving the group" in out and "left" in out, w1.describe()
    # Committed everything it owned, then left: w2 owns everything long before w1's 60 s
    # session could have expired, starting where w1 stopped.
    wait_until("w2 to own everything", lambda: shared_by([w2]), timeout=15)
    no_partition_had_two_owners([w1, w2])
    every_owner_started_where_the_last_stopped([w1, w2])
    # Interrupted inside the callback, w1 still owned all six (the revocation was held until
    # it closed): its final commit covered them all, and it stopped them all.
    lines = w1.own_lines()
    final_commit = [line for line in lines if line.event == "committed"][-1]
    assert set(final_commit.partitions) == all_partitions(TOPIC, PARTITIONS), w1.describe()
    assert set(lines[-1].partitions) == all_partitions(TOPIC, PARTITIONS), w1.describe()
    assert lines[-1].event == "stopped", w1.describe()
