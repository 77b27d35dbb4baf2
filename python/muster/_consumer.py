"""The blocking consumer: :class:`Consumer`, in the style of confluent-kafka's.

Membership (joining, heartbeats, rebalances) runs in the background on the module's Rust
runtime and never waits for Python. What the application must act on arrives as
rebalance events (:class:`RebalanceEvent`), delivered by :meth:`Consumer.poll` on the caller's thread: it runs
``on_assign`` / ``on_revoke`` / ``on_lost`` (or a :class:`ConsumerRebalanceListener`) there,
as confluent-kafka's ``poll`` does. A revocation holds the rebalance back until its callback
returns, so offsets committed in ``on_revoke`` are the ones the next owner starts from.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import threading
import weakref
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ._config import PathLike, Servers, client_options
from ._errors import MemberClosedError, MusterError
from ._native import (
    ClientOptions,
    CommitResult,
    Member,
    MemberSpec,
    OffsetAndMetadata,
    RebalanceEvent,
    TopicPartition,
)

log = logging.getLogger("muster")

#: A partition: a :class:`TopicPartition` or a ``(topic, partition)`` tuple.
PartitionLike = Union[TopicPartition, Tuple[str, int]]
#: Offsets to commit: ``{partition: offset}`` or ``(partition, offset)`` pairs; an offset is an
#: ``int`` or an :class:`OffsetAndMetadata`.
Offsets = Union[
    Mapping[TopicPartition, Union[int, OffsetAndMetadata]],
    Mapping[Tuple[str, int], Union[int, OffsetAndMetadata]],
    Iterable[Tuple[PartitionLike, Union[int, OffsetAndMetadata]]],
]
#: ``on_assign`` / ``on_revoke`` / ``on_lost``: called with the consumer and the partitions.
RebalanceCallback = Callable[["Consumer", List[TopicPartition]], object]
#: ``on_commit``: called with the error (``None`` on success) and the offsets committed.
CommitCallback = Callable[[Optional[MusterError], Dict[TopicPartition, int]], object]


class ConsumerRebalanceListener:
    """Kafka's rebalance listener (aiokafka's ``ConsumerRebalanceListener``, Java's
    ``ConsumerRebalanceListener``): subclass it and pass it as ``listener=`` to
    ``subscribe``. With :class:`AsyncConsumer` the methods may be coroutines.
    """

    def on_partitions_revoked(self, revoked: List[TopicPartition]) -> object:
        """Partitions given up in an orderly way: commit their offsets here."""
        return None

    def on_partitions_assigned(self, assigned: List[TopicPartition]) -> object:
        """Partitions now owned (cooperative and consumer protocol: those added)."""
        return None

    def on_partitions_lost(self, lost: List[TopicPartition]) -> object:
        """Partitions lost without a chance to commit (others may own them already). By
        default the same as a revocation, as in Kafka's Java client."""
        return self.on_partitions_revoked(lost)


class _Callbacks:
    """The application's rebalance handlers, from callbacks or a listener."""

    def __init__(
        self,
        on_assign: Optional[Callable[..., object]],
        on_revoke: Optional[Callable[..., object]],
        on_lost: Optional[Callable[..., object]],
        listener: Optional[ConsumerRebalanceListener],
        owner: object,
    ) -> None:
        if listener is not None and (on_assign or on_revoke or on_lost):
            raise TypeError("give either listener= or on_assign/on_revoke/on_lost, not both")
        self.by_kind: Dict[str, Optional[Callable[[List[TopicPartition]], object]]] = {}
        if listener is not None:
            self.by_kind = {
                "assigned": listener.on_partitions_assigned,
                "revoked": listener.on_partitions_revoked,
                "lost": listener.on_partitions_lost,
            }
        else:
            for kind, callback in (
                ("assigned", on_assign),
                ("revoked", on_revoke),
                ("lost", on_lost),
            ):
                self.by_kind[kind] = (
                    None if callback is None else _bind(callback, weakref.proxy(owner))
                )

    def for_event(self, event: RebalanceEvent) -> Optional[Callable[[List[TopicPartition]], object]]:
        return self.by_kind.get(event.kind)


def _bind(
    callback: Callable[..., object], owner: object
) -> Callable[[List[TopicPartition]], object]:
    return lambda partitions: callback(owner, partitions)


class _Base:
    """Settings shared by :class:`Consumer` and :class:`AsyncConsumer`."""

    def __init__(
        self,
        group: str,
        *,
        server: Optional[Servers] = None,
        client_id: str = "muster-python",
        protocol: str = "classic",
        assignors: Sequence[str] = ("range", "cooperative-sticky"),
        server_assignor: Optional[str] = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 60_000,
        heartbeat_interval_ms: Optional[int] = None,
        instance_id: Optional[str] = None,
        token: Optional[str] = None,
        tls_ca: Optional[PathLike] = None,
        tls_client_cert: Optional[PathLike] = None,
        tls_client_key: Optional[PathLike] = None,
        tls_server_name: Optional[str] = None,
        request_timeout_ms: Optional[int] = None,
    ) -> None:
        self._group = group
        self._options: ClientOptions = client_options(
            server,
            client_id,
            token,
            tls_ca,
            tls_client_cert,
            tls_client_key,
            tls_server_name,
            request_timeout_ms,
        )
        self._settings: Dict[str, Any] = dict(
            protocol=protocol,
            assignors=list(assignors) if protocol == "classic" else [],
            server_assignor=server_assignor,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            instance_id=instance_id,
        )
        self._member: Optional[Member] = None
        self._callbacks = _Callbacks(None, None, None, None, self)
        self._held: Optional[RebalanceEvent] = None
        self._closed = False

    def _spec(self, topics: Sequence[str]) -> MemberSpec:
        if isinstance(topics, str):
            raise TypeError("topics is a list of topic names, not one string")
        return MemberSpec(self._group, list(topics), **self._settings)

    def _started(self) -> Member:
        if self._member is None:
            raise MemberClosedError("not subscribed: call subscribe() first")
        return self._member

    def _release_held(self) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None

    @property
    def group_id(self) -> str:
        """The group's id."""
        return self._group

    @property
    def member_id(self) -> str:
        """The member id the coordinator gave (consumer protocol: chosen by the client)."""
        return self._started().member_id

    @property
    def generation(self) -> int:
        """The group generation (consumer protocol: the member epoch); -1 before joining."""
        return self._started().generation

    @property
    def phase(self) -> str:
        """``joining``, ``syncing``, ``stable``, ``closed`` or ``failed``."""
        return self._started().phase

    def assignment(self) -> List[TopicPartition]:
        """The partitions the member owns now."""
        return self._started().assignment


# Consumers still open at interpreter exit leave their groups then (their partitions are
# handed over at once instead of after the session timeout).
_open: "weakref.WeakSet[_Base]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    for consumer in list(_open):
        member = consumer._member
        if member is not None and not consumer._closed:
            try:
                member.close()
            except MusterError as e:
                log.warning("closing group member %s at exit: %s", consumer._group, e)


class Consumer(_Base):
    """A member of a consumer group, blocking API (confluent-kafka's ``Consumer`` shape).

    >>> consumer = Consumer("billing", server="127.0.0.1:7450")
    >>> consumer.subscribe(["orders"], on_assign=..., on_revoke=..., on_lost=...)
    >>> while running:
    ...     consumer.poll(1.0)       # runs the callbacks here, on this thread
    ...     consumer.commit({TopicPartition("orders", 0): 42})
    >>> consumer.close()             # leaves the group: the partitions move at once

    ``protocol`` is ``"classic"`` (JoinGroup / SyncGroup; the client-side ``assignors``, by
    preference: ``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``) or
    ``"consumer"`` (Kafka 4's protocol, KIP-848: the server assigns, with
    ``server_assignor`` ``uniform`` or ``range``). Connection settings left ``None`` come
    from the CLI's environment variables (``MUSTER_SERVER``, ``MUSTER_TOKEN``,
    ``MUSTER_TLS_*``). Blocking calls release the GIL, and Ctrl-C interrupts them.
    """

    def __init__(
        self,
        group: str,
        *,
        server: Optional[Servers] = None,
        client_id: str = "muster-python",
        protocol: str = "classic",
        assignors: Sequence[str] = ("range", "cooperative-sticky"),
        server_assignor: Optional[str] = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 60_000,
        heartbeat_interval_ms: Optional[int] = None,
        instance_id: Optional[str] = None,
        token: Optional[str] = None,
        tls_ca: Optional[PathLike] = None,
        tls_client_cert: Optional[PathLike] = None,
        tls_client_key: Optional[PathLike] = None,
        tls_server_name: Optional[str] = None,
        request_timeout_ms: Optional[int] = None,
        on_commit: Optional[CommitCallback] = None,
    ) -> None:
        super().__init__(
            group,
            server=server,
            client_id=client_id,
            protocol=protocol,
            assignors=assignors,
            server_assignor=server_assignor,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            instance_id=instance_id,
            token=token,
            tls_ca=tls_ca,
            tls_client_cert=tls_client_cert,
            tls_client_key=tls_client_key,
            tls_server_name=tls_server_name,
            request_timeout_ms=request_timeout_ms,
        )
        self._on_commit = on_commit
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: Optional[RebalanceCallback] = None,
        on_revoke: Optional[RebalanceCallback] = None,
        on_lost: Optional[RebalanceCallback] = None,
        *,
        listener: Optional[ConsumerRebalanceListener] = None,
    ) -> None:
        """Connects and joins the group, subscribed to ``topics``.

        The callbacks run from :meth:`poll`, with this consumer and the list of partitions:
        ``on_assign`` for partitions now owned, ``on_revoke`` for partitions given up (commit
        their offsets there: the rebalance waits until it returns), ``on_lost`` for
        partitions lost without a chance to commit. Alternatively a
        :class:`ConsumerRebalanceListener`.
        """
        if self._member is not None:
            raise MusterError("already subscribed (one subscription per consumer)")
        self._callbacks = _Callbacks(on_assign, on_revoke, on_lost, listener, self)
        self._member = Member.start(self._options, self._spec(topics))
        _open.add(self)

    def poll(self, timeout: Optional[float] = None) -> Optional[RebalanceEvent]:
        """Waits at most ``timeout`` seconds (``None``: until one comes) for the next
        rebalance event, runs its callback on this thread, and returns it (``None`` if none
        came). Also runs ``on_commit`` for background commits that finished.

        An event without a callback is held until the next ``poll`` (or ``close``): a
        revocation waits for the application until then. If a callback raises, the event is
        released, the member leaves the group, and the exception propagates; except for
        ``KeyboardInterrupt`` and ``SystemExit`` (Ctrl-C, a shutdown): those propagate with the
        event still held, so the application's shutdown can commit the partitions before
        :meth:`close` hands them over. A fatal error of the member is raised as its :class:`MusterError`.
        """
        member = self._started()
        self._release_held()
        while True:
            # What is queued already is taken without a round trip through the runtime.
            item = member.try_next_event()
            if item is None and timeout != 0:
                item = member.next_event(timeout)
            if item is None:
                return None
            if isinstance(item, CommitResult):
                self._commit_done(item)
                continue
            return self._deliver(item)

    def _deliver(self, event: RebalanceEvent) -> RebalanceEvent:
        callback = self._callbacks.for_event(event)
        if callback is None:
            self._held = event
            return event
        try:
            callback(event.partitions)
        except (KeyboardInterrupt, SystemExit):
            # The application is stopping: the partitions stay its own (the rebalance waits)
            # until it closes or polls again, so that its final commit still covers them.
            self._held = event
            raise
        except BaseException:
            event.release()
            log.error(
                "the %s callback of group %s raised: the member leaves the group",
                event.kind,
                self._group,
            )
            self.close()
            raise
        event.release()
        return event

    def _commit_done(self, result: CommitResult) -> None:
        error = result.error
        if self._on_commit is not None:
            self._on_commit(error, result.offsets)
        elif error is not None:
            log.warning("background commit failed: %s", error)

    def commit(self, offsets: Offsets, *, asynchronous: bool = False) -> None:
        """Commits offsets as this member (fenced by its generation and ownership).

        Blocking by default; ``asynchronous=True`` sends it and returns at once, and the
        outcome goes to ``on_commit`` from a later :meth:`poll` (or is logged on failure).
        Raises :class:`PartitionsNotOwnedError` for partitions the member no longer owns.
        """
        member = self._started()
        if asynchronous:
            member.commit_background(offsets, next(self._tokens))
        else:
            member.commit(offsets)

    def committed(
        self, partitions: Optional[Iterable[PartitionLike]] = None
    ) -> Dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets for ``partitions`` (``None``: every committed
        partition). Partitions without a commit are absent."""
        return self._started().fetch_offsets(partitions)

    def close(self) -> None:
        """Leaves the group (its partitions move to the other members at once) and stops.
        Commit what you processed first. Idempotent; not cut short by Ctrl-C."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._release_held()
        if self._member is not None:
            self._member.close()
            # Events emitted by the close itself (the final revocation) are not delivered:
            # the member has left, a commit could no longer succeed.
            try:
                while self._member.next_event(0) is not None:
                    pass
            except MusterError:
                pass
        _open.discard(self)

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
