"""The admin calls of the ``muster`` CLI: :class:`Admin` (blocking) and :class:`AsyncAdmin`
(asyncio). Answers are plain dicts and lists named as the protocol's fields (the
CLI's ``--json`` output); offsets are ``{TopicPartition: OffsetAndMetadata}``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, TypedDict

from ._config import PathLike, Servers, client_options
from ._consumer import Offsets, PartitionLike
from ._native import AdminClient, OffsetAndMetadata, TopicPartition


class TopicInfo(TypedDict):
    """A topic of the catalog."""

    topic: str
    partitions: int


class Node(TypedDict):
    """A node of the cluster, as clients reach it."""

    node_id: str
    host: str
    port: int


class ListedGroup(TypedDict):
    group_id: str
    state: str
    members: int


class NodeGroup(TypedDict):
    node: Node
    group: ListedGroup


class NodeFailure(TypedDict):
    node: Node
    error: str


class GroupListing(TypedDict):
    """ListGroups at every node: the nodes asked, the groups with the node that listed each,
    and the nodes that could not be asked."""

    nodes: List[Node]
    groups: List[NodeGroup]
    failed: List[NodeFailure]


class Admin:
    """The admin calls, blocking (the GIL is released while waiting).

    >>> admin = Admin("127.0.0.1:7450")
    >>> admin.ensure_topic("orders", 6)
    >>> admin.describe_group("billing")["members"]
    """

    def __init__(
        self,
        server: Optional[Servers] = None,
        *,
        client_id: str = "muster-python-admin",
        token: Optional[str] = None,
        tls_ca: Optional[PathLike] = None,
        tls_client_cert: Optional[PathLike] = None,
        tls_client_key: Optional[PathLike] = None,
        tls_server_name: Optional[str] = None,
        request_timeout_ms: Optional[int] = None,
    ) -> None:
        options = client_options(
            server, client_id, token, tls_ca, tls_client_cert, tls_client_key,
            tls_server_name, request_timeout_ms,
        )
        self._native = AdminClient.connect(options)

    def create_topic(self, topic: str, partitions: int) -> None:
        """Creates ``topic`` with ``partitions`` partitions, or raises its count to that."""
        result: None = self._native.create_topic(topic, partitions)
        return result

    def ensure_topic(self, topic: str, partitions: int) -> int:
        """Creates ``topic`` unless it exists; returns its partition count."""
        result: int = self._native.ensure_topic(topic, partitions)
        return result

    def list_topics(self) -> List[TopicInfo]:
        """Every topic of the catalog (``muster topics list``)."""
        result: List[TopicInfo] = self._native.list_topics()
        return result

    def describe_topic(self, topic: str) -> Optional[TopicInfo]:
        """One topic, or ``None`` if it does not exist."""
        result: Optional[TopicInfo] = self._native.describe_topic(topic)
        return result

    def list_groups(self, states: Sequence[str] = ()) -> GroupListing:
        """The groups in any of ``states`` (``[]``: all; e.g. ``"Stable"``) on every node, with the nodes that could not be asked (``muster groups list``)."""
        result: GroupListing = self._native.list_groups(list(states))
        return result

    def describe_group(self, group: str) -> Dict[str, Any]:
        """A group's state, generation, assignor, leader and members (``muster groups describe``)."""
        result: Dict[str, Any] = self._native.describe_group(group)
        return result

    def describe_consumer_group(self, group: str) -> Dict[str, Any]:
        """A consumer-protocol group: epochs, server assignor, members with their target assignments."""
        result: Dict[str, Any] = self._native.describe_consumer_group(group)
        return result

    def delete_group(self, group: str) -> None:
        """Deletes an Empty group and its offsets (``muster groups delete``)."""
        result: None = self._native.delete_group(group)
        return result

    def find_coordinator(self, group: str) -> Node:
        """The node that coordinates ``group`` (``muster groups coordinator``)."""
        result: Node = self._native.find_coordinator(group)
        return result

    def group_history(self, group: str, limit: int = 0) -> List[Dict[str, Any]]:
        """The group's rebalance journal, newest first (``muster groups history``)."""
        result: List[Dict[str, Any]] = self._native.group_history(group, limit)
        return result

    def group_diagnosis(self, group: str) -> Dict[str, Any]:
        """What the group waits for right now (``muster groups why``)."""
        result: Dict[str, Any] = self._native.group_diagnosis(group)
        return result

    def simulate(self, group: str, *, remove: Sequence[str] = (), add: int = 0, partitions: Optional[Mapping[str, int]] = None) -> Dict[str, Any]:
        """A dry-run rebalance: per member what it would keep, lose and gain (``muster groups simulate``)."""
        result: Dict[str, Any] = self._native.simulate(group, remove=list(remove), add=add, partitions=dict(partitions or {}))
        return result

    def describe_cluster(self) -> Dict[str, Any]:
        """The cluster's name, shard count and nodes (``muster cluster describe``)."""
        result: Dict[str, Any] = self._native.describe_cluster()
        return result

    def fetch_offsets(self, group: str, partitions: Optional[Iterable[PartitionLike]] = None) -> Dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets (``muster offsets get``)."""
        result: Dict[TopicPartition, OffsetAndMetadata] = self._native.fetch_offsets(group, partitions)
        return result

    def set_offsets(self, group: str, offsets: Offsets) -> None:
        """Sets offsets of an Empty group (``muster offsets set``)."""
        result: None = self._native.set_offsets(group, offsets)
        return result

    def offset_history(self, group: str, *, topic: Optional[str] = None, partition: Optional[int] = None, limit: int = 0) -> Dict[str, Any]:
        """The recorded history of a group's offsets (``muster offsets history``)."""
        result: Dict[str, Any] = self._native.offset_history(group, topic=topic, partition=partition, limit=limit)
        return result

    def reset_offsets(self, group: str, *, topics: Optional[Mapping[str, Optional[Sequence[int]]]] = None, to_time_ms: Optional[int] = None, shift_by: Optional[int] = None, to_offset: Optional[int] = None, to_earliest_recorded: bool = False, execute: bool = False) -> Dict[str, Any]:
        """Resets offsets to a point in time, by a shift, to an offset or to the earliest recorded (exactly one); a dry run unless ``execute`` (``muster offsets reset``). ``topics``: topic → partitions (``None``: all)."""
        result: Dict[str, Any] = self._native.reset_offsets(group, topics={t: (None if p is None else list(p)) for t, p in (topics or {}).items()}, to_time_ms=to_time_ms, shift_by=shift_by, to_offset=to_offset, to_earliest_recorded=to_earliest_recorded, execute=execute)
        return result

    def restore_offsets(self, group: str, *, execute: bool = False) -> Dict[str, Any]:
        """Restores expired offsets from the server's quarantine; a dry run unless ``execute`` (``muster offsets restore``)."""
        result: Dict[str, Any] = self._native.restore_offsets(group, execute=execute)
        return result


class AsyncAdmin:
    """The admin calls as awaitables: ``admin = await AsyncAdmin.connect(...)``; methods as
    :class:`Admin`'s."""

    def __init__(self, native: AdminClient) -> None:
        self._native = native

    @classmethod
    async def connect(
        cls,
        server: Optional[Servers] = None,
        *,
        client_id: str = "muster-python-admin",
        token: Optional[str] = None,
        tls_ca: Optional[PathLike] = None,
        tls_client_cert: Optional[PathLike] = None,
        tls_client_key: Optional[PathLike] = None,
        tls_server_name: Optional[str] = None,
        request_timeout_ms: Optional[int] = None,
    ) -> "AsyncAdmin":
        """Connects. Connection settings left ``None`` come from the environment."""
        options = client_options(
            server, client_id, token, tls_ca, tls_client_cert, tls_client_key,
            tls_server_name, request_timeout_ms,
        )
        native: AdminClient = await AdminClient.connect_async(options)
        return cls(native)

    async def create_topic(self, topic: str, partitions: int) -> None:
        """Creates ``topic`` with ``partitions`` partitions, or raises its count to that."""
        result: None = await self._native.create_topic(topic, partitions)
        return result

    async def ensure_topic(self, topic: str, partitions: int) -> int:
        """Creates ``topic`` unless it exists; returns its partition count."""
        result: int = await self._native.ensure_topic(topic, partitions)
        return result

    async def list_topics(self) -> List[TopicInfo]:
        """Every topic of the catalog (``muster topics list``)."""
        result: List[TopicInfo] = await self._native.list_topics()
        return result

    async def describe_topic(self, topic: str) -> Optional[TopicInfo]:
        """One topic, or ``None`` if it does not exist."""
        result: Optional[TopicInfo] = await self._native.describe_topic(topic)
        return result

    async def list_groups(self, states: Sequence[str] = ()) -> GroupListing:
        """The groups in any of ``states`` (``[]``: all; e.g. ``"Stable"``) on every node, with the nodes that could not be asked (``muster groups list``)."""
        result: GroupListing = await self._native.list_groups(list(states))
        return result

    async def describe_group(self, group: str) -> Dict[str, Any]:
        """A group's state, generation, assignor, leader and members (``muster groups describe``)."""
        result: Dict[str, Any] = await self._native.describe_group(group)
        return result

    async def describe_consumer_group(self, group: str) -> Dict[str, Any]:
        """A consumer-protocol group: epochs, server assignor, members with their target assignments."""
        result: Dict[str, Any] = await self._native.describe_consumer_group(group)
        return result

    async def delete_group(self, group: str) -> None:
        """Deletes an Empty group and its offsets (``muster groups delete``)."""
        result: None = await self._native.delete_group(group)
        return result

    async def find_coordinator(self, group: str) -> Node:
        """The node that coordinates ``group`` (``muster groups coordinator``)."""
        result: Node = await self._native.find_coordinator(group)
        return result

    async def group_history(self, group: str, limit: int = 0) -> List[Dict[str, Any]]:
        """The group's rebalance journal, newest first (``muster groups history``)."""
        result: List[Dict[str, Any]] = await self._native.group_history(group, limit)
        return result

    async def group_diagnosis(self, group: str) -> Dict[str, Any]:
        """What the group waits for right now (``muster groups why``)."""
        result: Dict[str, Any] = await self._native.group_diagnosis(group)
        return result

    async def simulate(self, group: str, *, remove: Sequence[str] = (), add: int = 0, partitions: Optional[Mapping[str, int]] = None) -> Dict[str, Any]:
        """A dry-run rebalance: per member what it would keep, lose and gain (``muster groups simulate``)."""
        result: Dict[str, Any] = await self._native.simulate(group, remove=list(remove), add=add, partitions=dict(partitions or {}))
        return result

    async def describe_cluster(self) -> Dict[str, Any]:
        """The cluster's name, shard count and nodes (``muster cluster describe``)."""
        result: Dict[str, Any] = await self._native.describe_cluster()
        return result

    async def fetch_offsets(self, group: str, partitions: Optional[Iterable[PartitionLike]] = None) -> Dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets (``muster offsets get``)."""
        result: Dict[TopicPartition, OffsetAndMetadata] = await self._native.fetch_offsets(group, partitions)
        return result

    async def set_offsets(self, group: str, offsets: Offsets) -> None:
        """Sets offsets of an Empty group (``muster offsets set``)."""
        result: None = await self._native.set_offsets(group, offsets)
        return result

    async def offset_history(self, group: str, *, topic: Optional[str] = None, partition: Optional[int] = None, limit: int = 0) -> Dict[str, Any]:
        """The recorded history of a group's offsets (``muster offsets history``)."""
        result: Dict[str, Any] = await self._native.offset_history(group, topic=topic, partition=partition, limit=limit)
        return result

    async def reset_offsets(self, group: str, *, topics: Optional[Mapping[str, Optional[Sequence[int]]]] = None, to_time_ms: Optional[int] = None, shift_by: Optional[int] = None, to_offset: Optional[int] = None, to_earliest_recorded: bool = False, execute: bool = False) -> Dict[str, Any]:
        """Resets offsets to a point in time, by a shift, to an offset or to the earliest recorded (exactly one); a dry run unless ``execute`` (``muster offsets reset``). ``topics``: topic → partitions (``None``: all)."""
        result: Dict[str, Any] = await self._native.reset_offsets(group, topics={t: (None if p is None else list(p)) for t, p in (topics or {}).items()}, to_time_ms=to_time_ms, shift_by=shift_by, to_offset=to_offset, to_earliest_recorded=to_earliest_recorded, execute=execute)
        return result

    async def restore_offsets(self, group: str, *, execute: bool = False) -> Dict[str, Any]:
        """Restores expired offsets from the server's quarantine; a dry run unless ``execute`` (``muster offsets restore``)."""
        result: Dict[str, Any] = await self._native.restore_offsets(group, execute=execute)
        return result
