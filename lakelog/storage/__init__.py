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
        path = url[len("file://") :] if url.startswith("file://") else url
        return LocalStorage(os.path.expanduser(path))
    if scheme in ("s3", "s3a"):
        return S3Storage("s3://" + url.split("://", 1)[1], s3)
    if scheme == "hdfs":
        return HdfsStorage(url)
    if scheme == "memory":
        return MemoryStorage(url)
    raise InvalidConfigError(
        f"unsupported storage root {url!r}: use a local path, file://, s3://, hdfs:// or memory://"
    )
