"""Many group members in one process, each committing its partitions' offsets: the Python half
of the client benchmark, the twin of crates/muster-client/examples/members_load.rs (same
options and output; compare.py runs both against one musterd and counts at the server).

Every member is a ``muster.AsyncConsumer`` (a connection of its own) on one event loop: it
serves its rebalance events with ``poll`` and commits the offsets of what it owns every
``--commit-interval-ms`` (0: one commit after another). Prints ``READY`` once every member
owns a partition, runs until SIGTERM or Ctrl-C, then leaves and prints ``COMMITS <n>``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import List, Set

import muster
from muster import AsyncConsumer, TopicPartition


async def member_loop(
    consumer: AsyncConsumer, interval: float, stop: asyncio.Event, state: dict[str, int]
) -> None:
    owned: Set[TopicPartition] = set()

    def assigned(_c: AsyncConsumer, parts: List[TopicPartition]) -> None:
        if not owned and parts:
            state["owning"] += 1
        owned.update(parts)

    def released(_c: AsyncConsumer, parts: List[TopicPartition]) -> None:
        had = bool(owned)
        owned.difference_update(parts)
        if had and not owned:
            state["owning"] -= 1

    consumer.subscribe([state_topic], on_assign=assigned, on_revoke=released, on_lost=released)
    await consumer.start()
    offset = 0
    loop = asyncio.get_running_loop()
    next_commit = loop.time()
    started = False
    while not stop.is_set():
        # Serve rebalance events until the next commit is due.
        await consumer.poll(max(0.0, next_commit - loop.time()) if owned else 0.05)
        if owned and not started:
            # The first commit once the member owns something (the Rust driver's first tick).
            started, next_commit = True, loop.time()
        if owned and loop.time() >= next_commit:
            offset += 1
            try:
                await consumer.commit({tp: offset for tp in owned})
                state["commits"] += 1
            except muster.MusterError:
                pass
            # A fixed rate, as the Rust driver's tokio interval: late commits catch up.
            next_commit += interval
    await consumer.close()


state_topic = "bench"


async def main() -> None:
    global state_topic
    p = argparse.ArgumentParser()
    p.add_argument("--server", default="127.0.0.1:7450")
    p.add_argument("--groups", type=int, default=100)
    p.add_argument("--members", type=int, default=10)
    p.add_argument("--topic", default="bench")
    p.add_argument("--group-prefix", default="load")
    p.add_argument("--commit-interval-ms", type=int, default=1000)
    p.add_argument("--session-timeout-ms", type=int, default=10_000)
    args = p.parse_args()
    state_topic = args.topic
    muster.Admin(args.server).ensure_topic(args.topic, args.members)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    state = {"owning": 0, "commits": 0}
    tasks = []
    for g in range(args.groups):
        for m in range(args.members):
            consumer = AsyncConsumer(
                f"{args.group_prefix}-{g}",
                server=args.server,
                client_id=f"load-{g}-{m}",
                assignors=["range", "cooperative-sticky"],
                session_timeout_ms=args.session_timeout_ms,
            )
            tasks.append(
                asyncio.create_task(
                    member_loop(consumer, args.commit_interval_ms / 1000, stop, state)
                )
            )
    total = args.groups * args.members
    while state["owning"] < total:
        await asyncio.sleep(0.05)
    print("READY", flush=True)
    await stop.wait()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"COMMITS {state['commits']}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
