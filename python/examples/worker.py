"""A worker that shares a topic's partitions with the other workers of its group: the Python
twin of crates/muster-client/examples/worker.rs.

It creates the topic if it is missing, joins the group, prints the partitions it gets and
loses, "processes" its partitions (advancing a position per partition), commits the positions
periodically and whenever it gives partitions up, and leaves the group cleanly on Ctrl-C (or
SIGTERM)::

    musterd &                                        # a server on 127.0.0.1:7450
    python python/examples/worker.py --name w1 &
    python python/examples/worker.py --name w2 &
    python python/examples/worker.py --name w3 &
    kill -9 %2   # w2 dies without leaving: after its session timeout, w1 and w3 take over
    kill %3      # w3 leaves cleanly: w1 takes over at once

``--group-protocol consumer`` makes it a consumer-protocol member (Kafka 4's KIP-848; the
server assigns, ``--server-assignor uniform|range``). ``--ownership-log`` prints the
machine-readable ``own <unix us> <event> <epoch> <topic/partition[=position],...>`` lines of
the Rust worker (assigned, revoked, lost, committed, stopped).

Settings come from arguments or the environment, as for the Rust worker: ``MUSTER_SERVER``,
``MUSTER_GROUP``, ``MUSTER_TOPICS``, ``MUSTER_GROUP_PROTOCOL``, and for a secured server
``MUSTER_TOKEN``, ``MUSTER_TLS_CA``, ``MUSTER_TLS_CLIENT_CERT``, ``MUSTER_TLS_CLIENT_KEY``,
``MUSTER_TLS_SERVER_NAME`` (read by the muster package itself when not given).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from types import FrameType
from typing import Dict, Iterable, List, Optional, Tuple

import muster
from muster import Consumer, TopicPartition


def parse_args() -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(
        description="A Muster group member that owns partitions and commits offsets"
    )
    p.add_argument("--server", default=env("MUSTER_SERVER", "127.0.0.1:7450"),
                   help="server address, or a cluster's nodes comma-separated")
    p.add_argument("--group", default=env("MUSTER_GROUP", "workers"))
    p.add_argument("--topics", default=env("MUSTER_TOPICS", "jobs"),
                   help="topics to subscribe to, comma-separated (created when missing)")
    p.add_argument("--partitions", type=int, default=6,
                   help="partition count of a topic this worker creates")
    p.add_argument("--name", default="worker", help="printed on every line; the client id")
    p.add_argument("--instance-id", default=None, help="static membership")
    p.add_argument("--group-protocol", default=env("MUSTER_GROUP_PROTOCOL", "classic"),
                   choices=["classic", "consumer"])
    p.add_argument("--assignors", default="cooperative-sticky",
                   help="classic protocol: assignors by preference, comma-separated")
    p.add_argument("--server-assignor", default=None,
                   help="consumer protocol: uniform or range")
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=None,
                   help="classic protocol [default: a third of the session timeout]")
    p.add_argument("--commit-interval-ms", type=int, default=2000)
    p.add_argument("--ownership-log", action="store_true",
                   help="print machine-readable `own ...` lines")
    p.add_argument("--token", default=None)
    p.add_argument("--tls-ca", default=None)
    p.add_argument("--tls-client-cert", default=None)
    p.add_argument("--tls-client-key", default=None)
    p.add_argument("--tls-server-name", default=None)
    return p.parse_args()


def show(partitions: Iterable[TopicPartition]) -> str:
    listed = sorted(partitions)
    return ", ".join(str(tp) for tp in listed) if listed else "nothing"


class Worker:
    """The worker's state: what it owns, and how far it got in each partition."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.name: str = args.name
        self.ownership_log: bool = args.ownership_log
        self.epoch_word = "generation" if args.group_protocol == "classic" else "epoch"
        # Partition -> next position to process (a stand-in for real consumption).
        self.positions: Dict[TopicPartition, int] = {}

    def say(self, line: str) -> None:
        print(f"[{self.name}] {line}", flush=True)

    def own(
        self,
        at: float,
        event: str,
        epoch: int,
        partitions: Iterable[Tuple[TopicPartition, Optional[int]]],
    ) -> None:
        if not self.ownership_log:
            return
        items = [
            f"{tp.topic}/{tp.partition}" + ("" if pos is None else f"={pos}")
            for tp, pos in partitions
        ]
        listed = ",".join(items) if items else "-"
        print(f"own {int(at * 1_000_000)} {event} {epoch} {listed}", flush=True)

    def committed(self, epoch: int, offsets: Dict[TopicPartition, int]) -> None:
        self.own(time.time(), "committed", epoch, offsets.items())

    def on_assign(self, consumer: Consumer, added: List[TopicPartition]) -> None:
        received = time.time()
        # Where the previous owner stopped. If that cannot be read, do not guess 0: the
        # exception leaves the group, and the partitions go to someone who can.
        committed = consumer.committed(added)
        for tp in added:
            entry = committed.get(tp)
            self.positions[tp] = entry.offset if entry is not None else 0
        self.own(received, "assigned", consumer.generation,
                 ((tp, self.positions[tp]) for tp in added))
        self.say(f"{self.epoch_word} {consumer.generation}: assigned {show(added)}; "
                 f"now own {show(self.positions)}")

    def on_revoke(self, consumer: Consumer, revoked: List[TopicPartition]) -> None:
        # Commit where we are before letting go: the rebalance waits for this callback.
        done = {tp: self.positions.pop(tp) for tp in revoked if tp in self.positions}
        try:
            consumer.commit(done)
            self.committed(consumer.generation, done)
        except muster.MusterError as e:
            print(f"[{self.name}] commit on revocation failed: {e}", file=sys.stderr)
        self.own(time.time(), "revoked", consumer.generation, ((tp, None) for tp in revoked))
        self.say(f"{self.epoch_word} {consumer.generation}: revoked {show(revoked)}; "
                 f"now own {show(self.positions)}")

    def on_lost(self, consumer: Consumer, lost: List[TopicPartition]) -> None:
        gone = [tp for tp in lost if self.positions.pop(tp, None) is not None]
        if not gone:
            return
        self.own(time.time(), "lost", consumer.generation, ((tp, None) for tp in gone))
        self.say(f"{self.epoch_word} {consumer.generation}: lost {show(gone)}; "
                 f"now own {show(self.positions)}")

    def commit_progress(self, consumer: Consumer) -> None:
        if not self.positions:
            return
        for tp in self.positions:
            self.positions[tp] += 1  # "processed" one more record
        snapshot = dict(self.positions)
        try:
            consumer.commit(snapshot)
            self.committed(consumer.generation, snapshot)
            self.say(f"committed {len(snapshot)} partitions")
        except muster.PartitionsNotOwnedError as e:
            # Another member owns these now: stop at once (the member reports them lost too).
            gone = [tp for tp in e.partitions if self.positions.pop(tp, None) is not None]
            self.own(time.time(), "lost", consumer.generation, ((tp, None) for tp in gone))
            print(f"[{self.name}] not the owner of {show(e.partitions)} any more: stopped "
                  f"them; now own {show(self.positions)}", file=sys.stderr)
        except muster.MusterError as e:
            print(f"[{self.name}] commit failed: {e}", file=sys.stderr)


def stop_on_sigterm(signum: int, frame: Optional[FrameType]) -> None:
    # Raised where the main thread is (usually inside poll): the same path as Ctrl-C.
    raise KeyboardInterrupt


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    worker = Worker(args)
    topics = [t for t in args.topics.split(",") if t]
    connection = dict(
        server=args.server,
        token=args.token,
        tls_ca=args.tls_ca,
        tls_client_cert=args.tls_client_cert,
        tls_client_key=args.tls_client_key,
        tls_server_name=args.tls_server_name,
    )
    admin = muster.Admin(client_id=args.name, **connection)
    for topic in topics:
        count = admin.ensure_topic(topic, args.partitions)
        worker.say(f"topic {topic}: {count} partitions")

    consumer = Consumer(
        args.group,
        client_id=args.name,
        protocol=args.group_protocol,
        assignors=args.assignors.split(","),
        server_assignor=args.server_assignor,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        instance_id=args.instance_id,
        **connection,
    )
    consumer.subscribe(topics, on_assign=worker.on_assign, on_revoke=worker.on_revoke,
                       on_lost=worker.on_lost)
    worker.say(f"joining group {args.group} ({args.group_protocol} protocol, member id "
               f"{consumer.member_id}) ...")

    interval = args.commit_interval_ms / 1000
    next_commit = time.monotonic() + interval
    try:
        while True:
            consumer.poll(max(0.0, next_commit - time.monotonic()))
            if time.monotonic() >= next_commit:
                worker.commit_progress(consumer)
                next_commit = time.monotonic() + interval
    except KeyboardInterrupt:
        pass
    except muster.MusterError as fatal:
        print(f"[{worker.name}] fatal: {fatal}", file=sys.stderr)
        consumer.close()
        return 1

    worker.say("shutting down: committing and leaving the group")
    last = dict(worker.positions)
    try:
        consumer.commit(last)
        worker.committed(consumer.generation, last)
    except muster.MusterError as e:
        print(f"[{worker.name}] final commit failed: {e}", file=sys.stderr)
    # Nothing is processed any more: the partitions are given up before the member leaves.
    worker.own(time.time(), "stopped", consumer.generation, ((tp, None) for tp in last))
    consumer.close()
    worker.say("left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
