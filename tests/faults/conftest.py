"""Fixtures of the fault suite: S3 roots reached by the broker through a cuttable proxy."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest

from lakelog.storage import S3Settings
from lakelog.testing.proxy import TcpProxy
from tests.fixtures.roots import RootSpec


@dataclass(frozen=True)
class ProxiedRoot:
    """One S3 root, seen directly (``root``: the test's reads) and through ``proxy`` (brokers)."""

    root: RootSpec
    proxy: TcpProxy

    @property
    def broker_settings(self) -> dict[str, object]:
        """start_broker settings that send the broker's S3 traffic through the proxy."""
        return {"s3_endpoint_url": self.proxy.url}


@pytest.fixture
def proxied_root(s3_settings: S3Settings, make_bucket: object) -> Iterator[ProxiedRoot]:
    endpoint = urlparse(str(s3_settings.endpoint_url))
    proxy = TcpProxy(endpoint.hostname or "127.0.0.1", endpoint.port or 80)
    proxy.start()
    bucket = make_bucket()  # type: ignore[operator]
    yield ProxiedRoot(RootSpec(f"s3://{bucket}/lakelog", s3_settings), proxy)
    proxy.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for the test: a local root that really runs out of space.

    The tests run as root in a container that may mount tmpfs, which is the
    closest thing to a full disk (ENOSPC from the kernel, for every writer,
    mid-file). A loop-mounted image would need mkfs and a loop device;
    RLIMIT_FSIZE gives EFBIG/SIGXFSZ only to one process, not ENOSPC.
    """
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
        check=True,
        capture_output=True,
    )
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True, capture_output=True)
