"""A member in this process: join, sync, commit and fetch with both group protocols and every
assignor, errors as exceptions, callbacks that raise, logging, and the asyncio API."""

from __future__ import annotations

import asyncio
import logging
from typing import Dict, List, Set

import pytest

import muster
from muster import Consumer, TopicPartition

from conftest import Musterd, wait_until

FAST = dict(session_timeout_ms=1500, heartbeat_interval_ms=100)


def consumer(server: Musterd, group: str, **settings: object) -> Consumer:
    merged: Dict[str, object] = {**FAST, **settings}
    return Consumer(group, server=server.addr, **merged)  # type: ignore[arg-type]


class Owned:
    """Callbacks that keep what a consumer owns."""

    def __init__(self) -> None:
        self.owned: Set[TopicPartition] = set()
        self.log: List[str] = []

    def on_assign(self, c: Consumer, parts: List[TopicPartition]) -> None:
        self.owned |= set(parts)
        self.log.append(f"assigned {sorted(parts)}")

    def on_revoke(self, c: Consumer, parts: List[TopicPartition]) -> None:
        self.owned -= set(parts)
        self.log.append(f"revoked {sorted(parts)}")

    def on_lost(self, c: Consumer, parts: List[TopicPartition]) -> None:
        self.owned -= set(parts)
        self.log.append(f"lost {sorted(parts)}")


def test_join_sync_commit_fetch(musterd: Musterd, admin: muster.Admin) -> None:
    assert admin.ensure_topic("orders", 4) == 4
    owned = Owned()
    with consumer(musterd, "billing") as c:
        c.subscribe(["orders"], on_assign=owned.on_assign, on_revoke=owned.on_revoke)
        everything = {TopicPartition("orders", p) for p in range(4)}

        def all_owned() -> bool:
            c.poll(0.05)
            return owned.owned == everything

        wait_until("the member to own every partition", all_owned)
        assert set(c.assignment()) == everything
        assert c.generation >= 1 and c.member_id and c.phase == "stable"

        c.commit({TopicPartition("orders", 0): 10, ("orders", 1): muster.OffsetAndMetadata(11, "m")})
        c.commit([(TopicPartition("orders", 2), 12)], asynchronous=True)
        results: List[object] = []
        c._on_commit = lambda err, offsets: results.append((err, offsets))
        wait_until("the background commit's outcome", lambda: c.poll(0.05) or results)
        assert results == [(None, {TopicPartition("orders", 2): 12})]

        committed = c.committed()
        assert committed[TopicPartition("orders", 0)] == muster.OffsetAndMetadata(10)
        assert committed[TopicPartition("orders", 1)].metadata == "m"
        assert committed[TopicPartition("orders", 2)].offset == 12
        assert TopicPartition("orders", 3) not in committed
        assert admin.fetch_offsets("billing", [("orders", 0)]) == {
            TopicPartition("orders", 0): muster.OffsetAndMetadata(10)
        }
        described = admin.describe_group("billing")
        assert described["state"] == "Stable" and len(described["members"]) == 1
    # Closed: the member left at once (no session timeout to wait for).
    assert admin.describe_group("billing")["state"] == "Empty"


@pytest.mark.parametrize(
    "settings",
    [
        dict(assignors=["range"]),
        dict(assignors=["roundrobin"]),
        dict(assignors=["sticky"]),
        dict(assignors=["cooperative-sticky"]),
        dict(protocol="consumer"),
        dict(protocol="consumer", server_assignor="range"),
    ],
    ids=["range", "roundrobin", "sticky", "cooperative-sticky", "consumer", "consumer-range"],
)
def test_two_members_share_a_topic(
    musterd: Musterd, admin: muster.Admin, settings: Dict[str, object]
) -> None:
    admin.ensure_topic("jobs", 6)
    first, second = Owned(), Owned()
    a = consumer(musterd, "shared", **settings)
    b = consumer(musterd, "shared", **settings)
    a.subscribe(["jobs"], on_assign=first.on_assign, on_revoke=first.on_revoke, on_lost=first.on_lost)
    b.subscribe(["jobs"], on_assign=second.on_assign, on_revoke=second.on_revoke, on_lost=second.on_lost)
    everything = {TopicPartition("jobs", p) for p in range(6)}

    def shared() -> bool:
        a.poll(0.02)
        b.poll(0.02)
        return (
            first.owned | second.owned == everything
            and not first.owned & second.owned
            and len(first.owned) == 3
        )

    wait_until("both members to own half each", shared)
    assert set(a.assignment()) == first.owned
    a.close()

    def taken_over() -> bool:
        b.poll(0.02)
        return second.owned == everything

    wait_until("the other member to own everything", taken_over)
    b.close()


def test_protocol_errors_carry_their_code_and_name(musterd: Musterd, admin: muster.Admin) -> None:
    admin.ensure_topic("t", 2)
    owned = Owned()
    with consumer(musterd, "errors", assignors=["range"]) as c:
        c.subscribe(["t"], on_assign=owned.on_assign)
        wait_until("an assignment", lambda: c.poll(0.05) or len(owned.owned) == 2)
        with pytest.raises(muster.PartitionsNotOwnedError) as refused:
            c.commit({TopicPartition("t", 0): 1, TopicPartition("other", 0): 1})
        assert refused.value.code == 205
        assert refused.value.name == "PARTITION_NOT_OWNED"
        assert refused.value.partitions == (TopicPartition("other", 0),)
        assert not refused.value.retriable
    with pytest.raises(muster.MusterError) as not_found:
        admin.delete_group("no-such-group")
    assert not_found.value.name == "GROUP_ID_NOT_FOUND" and not_found.value.code == 69
    with pytest.raises(muster.ConfigError):
        consumer(musterd, "g", assignors=["no-such-assignor"]).subscribe(["t"])
    with pytest.raises(muster.MusterConnectionError) as refused_connection:
        Consumer("g", server="127.0.0.1:1").subscribe(["t"])
    assert refused_connection.value.retriable


def test_a_callback_that_raises_reaches_the_application_and_the_member_leaves(
    musterd: Musterd, admin: muster.Admin
) -> None:
    admin.ensure_topic("t", 4)
    other = Owned()
    survivor = consumer(musterd, "raises", assignors=["range"])
    survivor.subscribe(["t"], on_assign=other.on_assign, on_revoke=other.on_revoke)
    wait_until("the first member to own everything", lambda: survivor.poll(0.02) or len(other.owned) == 4)

    class Boom(Exception):
        pass

    def explode(c: Consumer, parts: List[TopicPartition]) -> None:
        raise Boom(f"cannot handle {parts}")

    failing = consumer(musterd, "raises", assignors=["range"])
    failing.subscribe(["t"], on_assign=explode)
    with pytest.raises(Boom):
        wait_until("the failing callback", lambda: failing.poll(0.02) or survivor.poll(0.02) and False)
    # The member left cleanly: the group is back to one member at once, and that one owns
    # every partition again well before a session timeout could have expired the other.
    wait_until(
        "the survivor to own everything again",
        lambda: survivor.poll(0.02) or len(other.owned) == 4 and len(admin.describe_group("raises")["members"]) == 1,
        timeout=1.4,
    )
    with pytest.raises(muster.MemberClosedError):
        failing.commit({TopicPartition("t", 0): 1})
    survivor.close()


def test_client_events_reach_python_logging(
    musterd: Musterd, admin: muster.Admin, caplog: pytest.LogCaptureFixture
) -> None:
    admin.ensure_topic("t", 1)
    caplog.set_level(logging.DEBUG, logger="muster")
    muster.refresh_log_level()
    with consumer(musterd, "logged") as c:
        c.subscribe(["t"])
        wait_until("an event", lambda: c.poll(0.05))

        def found() -> bool:
            return any(
                r.name == "muster" and "coordinator found" in r.getMessage()
                and getattr(r, "muster_target", "").startswith("muster_client")
                for r in caplog.records
            )

        wait_until("the client's 'coordinator found' in logging", found, timeout=5)


def test_asyncio_consumer_with_a_listener(musterd: Musterd, admin: muster.Admin) -> None:
    admin.ensure_topic("t", 3)

    class Listener(muster.ConsumerRebalanceListener):
        def __init__(self) -> None:
            self.owned: Set[TopicPartition] = set()
            self.loop_thread_calls = 0

        async def on_partitions_assigned(self, assigned: List[TopicPartition]) -> None:
            asyncio.get_running_loop()  # runs on the event loop
            self.loop_thread_calls += 1
            self.owned |= set(assigned)

        async def on_partitions_revoked(self, revoked: List[TopicPartition]) -> None:
            self.owned -= set(revoked)

    async def run() -> None:
        listener = Listener()
        c = muster.AsyncConsumer("async", server=musterd.addr, **FAST)  # type: ignore[arg-type]
        c.subscribe(["t"], listener=listener)
        async with c:
            deadline = asyncio.get_running_loop().time() + 20
            while len(listener.owned) < 3:
                assert asyncio.get_running_loop().time() < deadline, "no assignment"
                await c.poll(0.05)
            await c.commit({TopicPartition("t", 1): 7})
            assert (await c.committed([("t", 1)]))[TopicPartition("t", 1)].offset == 7
            a = await muster.AsyncAdmin.connect(musterd.addr)
            described = await a.describe_group("async")
            assert described["state"] == "Stable"
            assert [t["topic"] for t in await a.list_topics()] == ["t"]
        assert listener.loop_thread_calls >= 1
        assert (await a.describe_group("async"))["state"] == "Empty"

    asyncio.run(run())


def test_close_from_another_thread_ends_a_blocked_poll(musterd: Musterd, admin: muster.Admin) -> None:
    import threading

    admin.ensure_topic("t", 1)
    c = consumer(musterd, "threads")
    c.subscribe(["t"])
    wait_until("an assignment", lambda: c.poll(0.05))
    returned: List[object] = []
    poller = threading.Thread(target=lambda: returned.append(c.poll(None)))
    poller.start()
    c.close()
    poller.join(5)
    assert not poller.is_alive(), "poll() still waiting after close()"
    assert admin.describe_group("threads")["state"] == "Empty"
