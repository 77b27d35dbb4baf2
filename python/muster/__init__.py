"""Muster's Python client: group membership with Kafka's rebalance API, offsets and admin
calls, built on the Rust client (muster-client) through PyO3.

- :class:`Consumer` (blocking, confluent-kafka's shape: ``subscribe(topics, on_assign=...,
  on_revoke=..., on_lost=...)`` and ``poll()``) and :class:`AsyncConsumer` (asyncio; aiokafka's
  :class:`ConsumerRebalanceListener` works with both);
- :class:`Admin` and :class:`AsyncAdmin`: the admin calls of the ``muster`` CLI;
- errors are MusterErrors carrying the protocol's error ``code`` and ``name``;
- the client's log events go to Python's ``logging``, logger ``muster``.

Connection settings not given come from the CLI's environment variables: ``MUSTER_SERVER``,
``MUSTER_TOKEN``, ``MUSTER_TLS_CA``, ``MUSTER_TLS_CLIENT_CERT``, ``MUSTER_TLS_CLIENT_KEY``,
``MUSTER_TLS_SERVER_NAME``. See docs/clients.md.
"""

from ._errors import (
    ConfigError,
    MemberClosedError,
    MusterConnectionError,
    MusterError,
    MusterTimeoutError,
    PartitionsNotOwnedError,
)
from ._native import (
    CommitResult,
    OffsetAndMetadata,
    RebalanceEvent,
    TopicPartition,
    __version__,
    refresh_log_level,
)
from ._consumer import Consumer, ConsumerRebalanceListener, Offsets, PartitionLike
from ._aio import AsyncConsumer
from ._admin import Admin, AsyncAdmin, GroupListing, Node, TopicInfo

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "CommitResult",
    "ConfigError",
    "Consumer",
    "ConsumerRebalanceListener",
    "GroupListing",
    "MemberClosedError",
    "MusterConnectionError",
    "MusterError",
    "MusterTimeoutError",
    "Node",
    "OffsetAndMetadata",
    "Offsets",
    "PartitionLike",
    "PartitionsNotOwnedError",
    "RebalanceEvent",
    "TopicInfo",
    "TopicPartition",
    "__version__",
    "refresh_log_level",
]
