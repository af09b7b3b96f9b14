"""Storage roots named by one URL; see ``base.Storage`` for the interface."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from lakelog.errors import InvalidConfigError
from lakelog.storage.base import FileInfo, Storage, check_relative_path, join
from lakelog.storage.settings import S3Settings

__all__ = ["FileInfo", "S3Settings", "Storage", "check_relative_path", "join", "open_storage"]


def open_storage(url: str, s3: S3Settings | None = None) -> Storage:
    """Open the root a URL names: a path or ``file://``, ``s3://``, ``hdfs://``, ``memory://``."""
    from lakelog.storage.fsspec_backend import HdfsStorage, MemoryStorage, S3Storage
    from lakelog.storage.local import LocalStorage

    if not url:
        raise InvalidConfigError("storage root URL is empty")
    scheme = urlparse(url).scheme
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        return LocalStorage(os.path.expanduser(_local_path(url)))
    if scheme in ("s3", "s3a"):
        return S3Storage("s3://" + url.split("://", 1)[1], s3)
    if scheme == "hdfs":
        return HdfsStorage(url)
    if scheme == "memory":
        return MemoryStorage(url)
    raise InvalidConfigError(
        f"unsupported storage root {url!r}: use a local path, file://, s3://, hdfs:// or memory://"
    )


def _local_path(url: str) -> str:
    """The directory of a plain path or ``file:`` URL.

    ``file:///abs``, ``file:/abs`` (as Hadoop and Spark print it) and
    ``file://localhost/abs`` (RFC 8089) all name ``/abs``, never a relative
    directory that would silently put the log elsewhere; a remote host is refused.
    """
    if not url.startswith("file:"):
        return url
    rest = url[len("file:") :]
    if rest.startswith("//"):
        host, sep, path = rest[2:].partition("/")
        if host not in ("", "localhost") or not sep:
            raise InvalidConfigError(
                f"unsupported storage root {url!r}: a file:// URL must name a local "
                "absolute path, e.g. file:///data/lakelog"
            )
        return "/" + path
    return rest
