"""Type stubs of the native module (python/src/): what the ``muster`` package is built on.
Applications use the classes of ``muster`` itself."""

from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

__version__: str

def refresh_log_level() -> None:
    """Reads the ``muster`` logger's effective level again (after changing the logging
    configuration at run time; also done on its own at most once a second)."""

class TopicPartition:
    """A partition of a topic; hashable and ordered."""

    def __init__(self, topic: str, partition: int) -> None: ...
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __lt__(self, other: "TopicPartition") -> bool: ...
    def __le__(self, other: "TopicPartition") -> bool: ...
    def __gt__(self, other: "TopicPartition") -> bool: ...
    def __ge__(self, other: "TopicPartition") -> bool: ...
    def __hash__(self) -> int: ...

class OffsetAndMetadata:
    """A committed offset and its metadata."""

    def __init__(self, offset: int, metadata: Optional[str] = None) -> None: ...
    @property
    def offset(self) -> int: ...
    @property
    def metadata(self) -> Optional[str]: ...

class RebalanceEvent:
    """Partitions assigned, revoked or lost."""

    @property
    def kind(self) -> str:
        """``"assigned"``, ``"revoked"`` or ``"lost"``."""
    @property
    def partitions(self) -> List[TopicPartition]: ...
    @property
    def generation(self) -> int:
        """The generation (consumer protocol: the member epoch) at the event."""
    @property
    def ownership_epochs(self) -> Dict[TopicPartition, int]:
        """The partitions' ownership epochs (fencing tokens), where known."""
    def release(self) -> None:
        """Lets the member go on with the rebalance; idempotent."""
    @property
    def released(self) -> bool: ...

class CommitResult:
    """The outcome of a background commit."""

    @property
    def token(self) -> int: ...
    @property
    def offsets(self) -> Dict[TopicPartition, int]: ...
    @property
    def error(self) -> Optional[Any]:
        """The commit's error (a ``muster.MusterError``), or ``None``."""

class ClientOptions:
    def __init__(
        self,
        servers: List[str],
        client_id: str,
        *,
        token: Optional[str] = None,
        tls_ca: Optional[str] = None,
        tls_client_cert: Optional[str] = None,
        tls_client_key: Optional[str] = None,
        tls_server_name: Optional[str] = None,
        request_timeout_ms: Optional[int] = None,
    ) -> None: ...

class MemberSpec:
    def __init__(
        self,
        group: str,
        topics: List[str],
        *,
        protocol: str,
        assignors: List[str],
        server_assignor: Optional[str],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: Optional[int],
        instance_id: Optional[str],
    ) -> None: ...

_Offsets = Any
_Partitions = Iterable[Union[TopicPartition, Tuple[str, int]]]

class Member:
    @staticmethod
    def start(options: ClientOptions, spec: MemberSpec) -> "Member": ...
    @staticmethod
    async def start_async(options: ClientOptions, spec: MemberSpec) -> "Member": ...
    def next_event(
        self, timeout: Optional[float] = None
    ) -> Union[RebalanceEvent, CommitResult, None]: ...
    def try_next_event(self) -> Union[RebalanceEvent, CommitResult, None]: ...
    async def next_event_async(
        self, timeout: Optional[float] = None
    ) -> Union[RebalanceEvent, CommitResult, None]: ...
    def commit(self, offsets: _Offsets) -> None: ...
    async def commit_async(self, offsets: _Offsets) -> None: ...
    def commit_background(self, offsets: _Offsets, token: int) -> None: ...
    def fetch_offsets(
        self, partitions: Optional[_Partitions] = None
    ) -> Dict[TopicPartition, OffsetAndMetadata]: ...
    async def fetch_offsets_async(
        self, partitions: Optional[_Partitions] = None
    ) -> Dict[TopicPartition, OffsetAndMetadata]: ...
    def close(self) -> None: ...
    async def close_async(self) -> None: ...
    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def assignment(self) -> List[TopicPartition]: ...
    @property
    def phase(self) -> str: ...

class AdminClient:
    """Methods return the answer (``connect``) or an awaitable of it (``connect_async``)."""

    @staticmethod
    def connect(options: ClientOptions) -> "AdminClient": ...
    @staticmethod
    async def connect_async(options: ClientOptions) -> "AdminClient": ...
    def __getattr__(self, name: str) -> Any: ...
