"""Connection settings from keyword arguments, or from the environment variables the
``muster`` CLI reads: ``MUSTER_SERVER`` (a ``HOST:PORT`` list, comma-separated),
``MUSTER_TOKEN``, ``MUSTER_TLS_CA`` (turns TLS on), ``MUSTER_TLS_CLIENT_CERT`` /
``MUSTER_TLS_CLIENT_KEY`` (mTLS) and ``MUSTER_TLS_SERVER_NAME``."""

from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from ._native import ClientOptions

DEFAULT_SERVER = "127.0.0.1:7450"

#: A server address, a comma-separated list of them, or a sequence of them.
Servers = Union[str, Sequence[str]]
PathLike = Union[str, "os.PathLike[str]"]


def _servers(server: Optional[Servers]) -> list[str]:
    if server is None:
        server = os.environ.get("MUSTER_SERVER") or DEFAULT_SERVER
    if isinstance(server, str):
        server = server.split(",")
    servers = [s.strip() for s in server if s.strip()]
    return servers


def _path(value: Optional[PathLike], env: str) -> Optional[str]:
    if value is None:
        value = os.environ.get(env) or None
    return None if value is None else os.fspath(value)


def client_options(
    server: Optional[Servers],
    client_id: str,
    token: Optional[str],
    tls_ca: Optional[PathLike],
    tls_client_cert: Optional[PathLike],
    tls_client_key: Optional[PathLike],
    tls_server_name: Optional[str],
    request_timeout_ms: Optional[int],
) -> ClientOptions:
    """The native options; an argument left ``None`` is read from the environment."""
    return ClientOptions(
        _servers(server),
        client_id,
        token=token if token is not None else (os.environ.get("MUSTER_TOKEN") or None),
        tls_ca=_path(tls_ca, "MUSTER_TLS_CA"),
        tls_client_cert=_path(tls_client_cert, "MUSTER_TLS_CLIENT_CERT"),
        tls_client_key=_path(tls_client_key, "MUSTER_TLS_CLIENT_KEY"),
        tls_server_name=tls_server_name
        if tls_server_name is not None
        else (os.environ.get("MUSTER_TLS_SERVER_NAME") or None),
        request_timeout_ms=request_timeout_ms,
    )
