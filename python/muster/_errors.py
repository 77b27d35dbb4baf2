"""The exceptions of the muster package.

Every error of the client is a :class:`MusterError`. One the server sent carries the
protocol's error ``code`` and ``name`` (docs/protocol.md §4, e.g. ``27`` /
``"REBALANCE_IN_PROGRESS"``); ``retriable`` says whether the same call may succeed later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from ._native import TopicPartition


class MusterError(Exception):
    """An error of the Muster client.

    Attributes:
        code: the protocol's error code, when the server sent one (else ``None``).
        name: the code's name, e.g. ``"ILLEGAL_GENERATION"`` (``None`` without a code, or for
            a code this version does not know).
        retriable: whether retrying the same call may succeed (a timeout, a lost connection,
            a coordinator moving).
    """

    code: Optional[int]
    name: Optional[str]
    retriable: bool

    def __init__(
        self,
        message: str,
        *,
        code: Optional[int] = None,
        name: Optional[str] = None,
        retriable: bool = False,
        partitions: Sequence[TopicPartition] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.name = name
        self.retriable = retriable


class PartitionsNotOwnedError(MusterError):
    """A commit named partitions the member does not own (``PARTITION_NOT_OWNED``, 205).

    The other partitions were committed. The member has lost ``partitions`` (another member
    owns them now): stop processing them, and do not retry.
    """

    partitions: Tuple[TopicPartition, ...]

    def __init__(
        self,
        message: str,
        *,
        code: Optional[int] = None,
        name: Optional[str] = None,
        retriable: bool = False,
        partitions: Sequence[TopicPartition] = (),
    ) -> None:
        super().__init__(message, code=code, name=name, retriable=retriable)
        self.partitions = tuple(partitions)


class MusterTimeoutError(MusterError, TimeoutError):
    """A request got no answer in time (retriable)."""


class MusterConnectionError(MusterError, ConnectionError):
    """The connection to the server was lost or could not be made (retriable)."""


class ConfigError(MusterError, ValueError):
    """Invalid settings (a member's, or TLS files that cannot be read)."""


class MemberClosedError(MusterError):
    """The member is closed (or was never started)."""


__all__ = [
    "ConfigError",
    "MemberClosedError",
    "MusterConnectionError",
    "MusterError",
    "MusterTimeoutError",
    "PartitionsNotOwnedError",
]
