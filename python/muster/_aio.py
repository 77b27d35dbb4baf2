"""The asyncio consumer: :class:`AsyncConsumer` (the admin client is ``_admin.AsyncAdmin``).

The same member as :class:`Consumer`, with awaitables completed on the caller's event loop;
callbacks (or a :class:`ConsumerRebalanceListener`, as in aiokafka) may be coroutine
functions, and run on the loop from :meth:`AsyncConsumer.poll`.
"""

from __future__ import annotations

import inspect
from typing import Awaitable, Callable, Dict, Iterable, List, Optional, Sequence, Union

from ._consumer import (
    ConsumerRebalanceListener,
    Offsets,
    PartitionLike,
    _Base,
    _Callbacks,
    _open,
    log,
)
from ._errors import MusterError
from ._native import CommitResult, Member, OffsetAndMetadata, RebalanceEvent, TopicPartition

#: ``on_assign`` / ``on_revoke`` / ``on_lost`` of an :class:`AsyncConsumer`: a function or a
#: coroutine function of the consumer and the partitions.
AsyncRebalanceCallback = Callable[["AsyncConsumer", List[TopicPartition]], Union[Awaitable[object], object]]


class AsyncConsumer(_Base):
    """A member of a consumer group, asyncio API.

    >>> consumer = AsyncConsumer("billing", server="127.0.0.1:7450")
    >>> consumer.subscribe(["orders"], listener=MyListener())
    >>> await consumer.start()
    >>> while running:
    ...     await consumer.poll(1.0)     # awaits the listener's coroutines, on this loop
    ...     await consumer.commit({TopicPartition("orders", 0): 42})
    >>> await consumer.close()

    Settings as :class:`Consumer`'s.
    """

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: Optional[AsyncRebalanceCallback] = None,
        on_revoke: Optional[AsyncRebalanceCallback] = None,
        on_lost: Optional[AsyncRebalanceCallback] = None,
        *,
        listener: Optional[ConsumerRebalanceListener] = None,
    ) -> None:
        """Records the subscription and the rebalance handlers; :meth:`start` joins."""
        if self._member is not None:
            raise MusterError("already started (one subscription per consumer)")
        self._callbacks = _Callbacks(on_assign, on_revoke, on_lost, listener, self)
        self._topics: Optional[List[str]] = list(topics)
        self._spec(topics)

    async def start(self) -> None:
        """Connects and joins the group."""
        topics = getattr(self, "_topics", None)
        if topics is None:
            raise MusterError("call subscribe() before start()")
        if self._member is not None:
            raise MusterError("already started")
        self._member = await Member.start_async(self._options, self._spec(topics))
        _open.add(self)

    async def poll(self, timeout: Optional[float] = None) -> Optional[RebalanceEvent]:
        """As :meth:`Consumer.poll`, on the event loop: handlers that are coroutine functions
        are awaited. Background-commit outcomes do not exist here (``commit`` is awaited)."""
        member = self._started()
        self._release_held()
        while True:
            # What is queued already is taken without a round trip through the runtime.
            item = member.try_next_event()
            if item is None and timeout != 0:
                item = await member.next_event_async(timeout)
            if item is None:
                return None
            if isinstance(item, CommitResult):
                continue
            return await self._deliver(item)

    async def _deliver(self, event: RebalanceEvent) -> RebalanceEvent:
        callback = self._callbacks.for_event(event)
        if callback is None:
            self._held = event
            return event
        try:
            outcome = callback(event.partitions)
            if inspect.isawaitable(outcome):
                await outcome
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
            await self.close()
            raise
        event.release()
        return event

    async def commit(self, offsets: Offsets) -> None:
        """Commits offsets as this member (as :meth:`Consumer.commit`)."""
        await self._started().commit_async(offsets)

    async def committed(
        self, partitions: Optional[Iterable[PartitionLike]] = None
    ) -> Dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (as :meth:`Consumer.committed`)."""
        return await self._started().fetch_offsets_async(partitions)

    async def close(self) -> None:
        """Leaves the group and stops (as :meth:`Consumer.close`)."""
        if self._closed:
            return
        self._closed = True
        self._release_held()
        if self._member is not None:
            await self._member.close_async()
            try:
                while await self._member.next_event_async(0) is not None:
                    pass
            except MusterError:
                pass
        _open.discard(self)

    async def __aenter__(self) -> "AsyncConsumer":
        if self._member is None:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
