"""TLS, mTLS and tokens, configured as the CLI is: the ``MUSTER_TLS_*`` and ``MUSTER_TOKEN``
environment variables (or the same keyword arguments). Certificates are made with the
``openssl`` command for each test."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

import muster
from muster import Consumer, TopicPartition

from conftest import Musterd, wait_until

FAST = dict(session_timeout_ms=1500, heartbeat_interval_ms=100)


def openssl(*args: str, cwd: Path) -> None:
    tool = shutil.which("openssl")
    if tool is None:
        pytest.fail("the openssl command is needed to make the test certificates")
    subprocess.run([tool, *args], cwd=cwd, check=True, capture_output=True)


def make_pki(dir: Path) -> Dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate
    whose CN is ``billing-app`` (its principal with mTLS)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=muster-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=dir,
    )
    for name, cn, ext in (
        ("server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "billing-app", "extendedKeyUsage=clientAuth\n"),
    ):
        (dir / f"{name}.ext").write_text("basicConstraints=CA:FALSE\n" + ext)
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=dir)
        openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=dir,
        )
    return {n: dir / n for n in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


def join_and_commit(addr: str, group: str, **connection: object) -> None:
    """A member joins through the connection given (or the environment), owns the topic,
    commits and reads the commit back, and leaves."""
    owned: List[TopicPartition] = []
    with Consumer(group, server=addr, **FAST, **connection) as c:  # type: ignore[arg-type]
        c.subscribe(["secure"], on_assign=lambda _c, parts: owned.extend(parts))
        wait_until("an assignment over TLS", lambda: c.poll(0.05) or len(owned) == 2)
        c.commit({TopicPartition("secure", 0): 5})
        assert c.committed()[TopicPartition("secure", 0)].offset == 5


def test_tls_from_the_environment(start_musterd, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    pki = make_pki(scratch)
    server: Musterd = start_musterd("--tls-cert", str(pki["server.pem"]), "--tls-key", str(pki["server.key"]))
    # Plaintext against a TLS listener: refused, as an exception.
    with pytest.raises(muster.MusterError):
        muster.Admin(server.addr, request_timeout_ms=2000).list_topics()
    monkeypatch.setenv("MUSTER_TLS_CA", str(pki["ca.pem"]))
    monkeypatch.setenv("MUSTER_SERVER", server.addr)
    admin = muster.Admin()  # everything from the environment
    admin.ensure_topic("secure", 2)
    join_and_commit(server.addr, "tls")
    # The name checked can be set (the certificate names localhost too).
    join_and_commit(server.addr, "tls-named", tls_server_name="localhost")
    with pytest.raises(muster.MusterError):
        join_and_commit(server.addr, "tls-wrong-name", tls_server_name="not-the-server")


def test_mutual_tls(start_musterd, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    pki = make_pki(scratch)
    server: Musterd = start_musterd(
        "--tls-cert", str(pki["server.pem"]), "--tls-key", str(pki["server.key"]),
        "--tls-client-ca", str(pki["ca.pem"]),
    )
    monkeypatch.setenv("MUSTER_TLS_CA", str(pki["ca.pem"]))
    with pytest.raises(muster.MusterError):
        muster.Admin(server.addr, request_timeout_ms=2000).list_topics()
    with pytest.raises(muster.ConfigError):
        muster.Admin(server.addr, tls_client_cert=pki["client.pem"])  # a certificate needs its key
    monkeypatch.setenv("MUSTER_TLS_CLIENT_CERT", str(pki["client.pem"]))
    monkeypatch.setenv("MUSTER_TLS_CLIENT_KEY", str(pki["client.key"]))
    muster.Admin(server.addr).ensure_topic("secure", 2)
    join_and_commit(server.addr, "mtls")


def test_tokens(start_musterd, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    token = "python-test-token-0123456789abcdef"
    auth = scratch / "auth.toml"
    auth.write_text(
        f"""
[[principals]]
name = "billing-app"
token_sha256 = "{hashlib.sha256(token.encode()).hexdigest()}"

[[acls]]
principal = "billing-app"
resource = "cluster"
pattern = "*"
operations = ["admin"]
"""
    )
    server: Musterd = start_musterd("--auth-file", str(auth))
    with pytest.raises(muster.MusterError) as refused:
        muster.Admin(server.addr, token="wrong-token").list_topics()
    assert refused.value.name == "AUTHENTICATION_FAILED", refused.value
    monkeypatch.setenv("MUSTER_TOKEN", token)
    muster.Admin(server.addr).ensure_topic("secure", 2)
    join_and_commit(server.addr, "tokens")
