"""A real S3-protocol server (moto's standalone server) on a free loopback port.

An S3 store, conditional PUTs included, without a cloud account: this runs
``lakelog.testing.atomic_moto`` in a subprocess (moto comes with the ``test``
extra). moto checks no signatures, so a bucket is one plain PUT and the
credentials are any non-empty strings.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from lakelog.storage import S3Settings
from lakelog.testing.brokers import LOOPBACK, ServerProcess, start_server

#: What every client of the server passes as credentials and region.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
}


@dataclass
class MotoServer(ServerProcess):
    """A running moto server; ``url`` is its ``http://127.0.0.1:<port>``."""

    def create_bucket(self, prefix: str = "lakelog") -> str:
        """A new, empty bucket; returns its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        answer = httpx.put(f"{self.url}/{name}", timeout=30)
        if answer.status_code != 200:
            raise RuntimeError(f"creating bucket {name} answered {answer.status_code}")
        return name

    def settings(self, endpoint: str | None = None) -> S3Settings:
        """How to reach this server (or ``endpoint``, a proxy in front of it), with its
        credentials; ``S3Settings.aws_variables`` turns them into a child's."""
        return S3Settings(
            endpoint_url=endpoint or self.url,
            access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region=CREDENTIALS["AWS_REGION"],
        )


def _accepting(server: ServerProcess) -> bool:
    try:
        with socket.create_connection((LOOPBACK, server.port), timeout=0.5):
            return True
    except OSError:
        return False


def start_moto(log_dir: Path, timeout_s: float = 30.0) -> MotoServer:
    """Start moto's server on a free loopback port; return once it accepts connections."""
    if importlib.util.find_spec("moto") is None:
        raise RuntimeError(
            "moto is not installed: the S3-protocol server comes with the test extra "
            '(pip install "lakelog[test]")'
        )
    args = ["-m", "lakelog.testing.atomic_moto", "-H", LOOPBACK]
    server = start_server("moto", args, log_dir, timeout_s=timeout_s, ready=_accepting)
    return MotoServer(server.name, server.url, server.port, server.process, server.log_path)


@contextlib.contextmanager
def running_moto(log_dir: Path) -> Iterator[MotoServer]:
    """``start_moto`` for a ``with`` block: the server is stopped on exit."""
    server = start_moto(log_dir)
    try:
        yield server
    finally:
        server.stop()
