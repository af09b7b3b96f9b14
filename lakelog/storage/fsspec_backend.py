"""Storage roots reached through fsspec: S3 (s3fs), HDFS (pyarrow) and memory.

The backends differ only in how they create an object only if it is absent;
everything else is fsspec's common API.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlparse

import fsspec
import pyarrow.fs
from botocore.exceptions import BotoCoreError
from fsspec.implementations.memory import MemoryFileSystem

from lakelog.errors import InvalidConfigError
from lakelog.storage.base import FileInfo, Storage, check_relative_path
from lakelog.storage.settings import S3Settings


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """Make the store's transport failures ``OSError``s, as the Storage contract says.

    botocore's connection errors are not OSErrors: an outage would reach clients as
    UNKNOWN_SERVER_ERROR instead of the retriable KAFKA_STORAGE_ERROR.
    """
    try:
        yield
    except BotoCoreError as exc:
        if isinstance(exc, OSError):
            raise
        raise ConnectionError(f"object store unreachable: {exc}") from exc


class FsspecStorage(Storage):
    """A root at ``<scheme>://<bucket-or-host>/<prefix>`` on an fsspec filesystem; each
    subclass names its delta-rs URI."""

    def __init__(self, url: str, fs: fsspec.AbstractFileSystem, base: str) -> None:
        self.url = url.rstrip("/")
        self.fs = fs
        self.base = base.rstrip("/")

    def _abs(self, path: str) -> str:
        return f"{self.base}/{check_relative_path(path)}"

    def _rel(self, absolute: str) -> str:
        absolute = absolute.rstrip("/")
        prefix = self.base.lstrip("/") + "/"
        stripped = absolute.lstrip("/")
        return stripped[len(prefix) :] if stripped.startswith(prefix) else stripped

    def read_bytes(self, path: str) -> bytes:
        with _store_errors():
            data = self.fs.cat_file(self._abs(path))
        assert isinstance(data, bytes)
        return data

    def read_many(self, paths: Sequence[str]) -> list[bytes | None]:
        if not paths:
            return []
        with _store_errors():
            fetched = self.fs.cat([self._abs(p) for p in paths], on_error="return")
            by_path = {self._rel(key): value for key, value in fetched.items()}
            found: list[bytes | None] = []
            for path in paths:
                value = by_path.get(check_relative_path(path))
                if value is None:  # named differently by the filesystem: ask for it alone
                    found.extend(super().read_many([path]))
                elif isinstance(value, FileNotFoundError):
                    found.append(None)
                elif isinstance(value, BaseException):
                    raise value
                else:
                    found.append(value)
        return found

    def put(self, path: str, data: bytes) -> None:
        with _store_errors():
            self.fs.pipe_file(self._abs(path), data)

    def put_if_absent(
        self, path: str, data: bytes, ready: Callable[[], None] | None = None
    ) -> bool:
        if ready is not None:
            ready()
        try:
            with _store_errors():
                self.fs.pipe_file(self._abs(path), data, mode="create")
        except FileExistsError:
            return False
        return True

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError), _store_errors():
            self.fs.rm_file(self._abs(path))

    def delete_tree(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError), _store_errors():
            self.fs.rm(self._abs(path), recursive=True)

    def list_dir(self, path: str) -> list[FileInfo]:
        rel = check_relative_path(path)
        try:
            with _store_errors():
                entries = self.fs.ls(self._abs(rel), detail=True, refresh=True)
        except FileNotFoundError:
            return []
        infos = []
        for e in entries:
            child = self._rel(e["name"])
            if child == rel:
                continue
            is_dir = e.get("type") == "directory"
            infos.append(FileInfo(child, 0 if is_dir else int(e.get("size") or 0), is_dir))
        return sorted(infos, key=lambda i: i.path)

    def arrow_filesystem(self) -> pyarrow.fs.FileSystem:
        return pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(self.fs))

    def arrow_path(self, path: str) -> str:
        return self._abs(path)


class S3Storage(FsspecStorage):
    """``s3://bucket/prefix`` through s3fs; commits rely on ``If-None-Match: *``."""

    def __init__(self, url: str, settings: S3Settings | None = None) -> None:
        self.settings = settings or S3Settings()
        bucket_and_prefix = url[len("s3://") :].strip("/")
        if not bucket_and_prefix:
            # A configuration mistake, not KafkaStorageError: that one is retriable
            # ("usually transient"), so clients would retry a URL that can never work.
            raise InvalidConfigError(f"storage URL {url!r} names no bucket")
        fs = fsspec.filesystem(
            "s3",
            key=self.settings.access_key_id,
            secret=self.settings.secret_access_key,
            token=self.settings.session_token,
            endpoint_url=self.settings.endpoint_url,
            client_kwargs={"region_name": self.settings.region},
            skip_instance_cache=True,
            # s3fs answers a read from the parent directory's last listing when it has
            # one: an object another client created since would read as missing.
            use_listings_cache=False,
        )
        super().__init__(url, fs, bucket_and_prefix)

    def __reduce__(self) -> tuple[Any, ...]:
        return (S3Storage, (self.url, self.settings))

    def delta_uri(self, path: str) -> str:
        return f"s3://{self._abs(path)}"

    def delta_storage_options(self) -> dict[str, str]:
        options = {**self.settings.aws_variables(), "conditional_put": "etag"}
        if self.settings.allow_http:
            options["AWS_ALLOW_HTTP"] = "true"
        return options


class HdfsStorage(FsspecStorage):
    """``hdfs://namenode:port/path`` through pyarrow's libhdfs binding.

    ``create`` without overwrite is atomic at the namenode: the put-if-absent. Needs a
    Hadoop client (``HADOOP_HOME``, ``CLASSPATH``).
    """

    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        fs = fsspec.filesystem("hdfs", host=parsed.hostname or "default", port=parsed.port or 0)
        super().__init__(url, fs, parsed.path or "/")

    def __reduce__(self) -> tuple[Any, ...]:
        return (HdfsStorage, (self.url,))

    def put_if_absent(
        self, path: str, data: bytes, ready: Callable[[], None] | None = None
    ) -> bool:
        target = self._abs(path)
        # A random name: writers on two hosts must never share (and overwrite) one temp
        # file, or a winner could commit the loser's bytes.
        tmp = f"{target}.tmp-{uuid.uuid4().hex}"
        self.fs.pipe_file(tmp, data)
        try:
            if ready is not None:
                ready()
            # HDFS rename refuses an existing destination: atomic create-if-absent.
            self.fs.mv(tmp, target)
        except OSError:
            self.fs.rm_file(tmp)
            if self.fs.exists(target):
                return False
            raise
        return True

    def delta_uri(self, path: str) -> str:
        return self.url.rstrip("/") + "/" + check_relative_path(path)


_MEMORY_LOCK = threading.Lock()


class MemoryStorage(FsspecStorage):
    """``memory://name``: a process-local root, for unit tests of pure logic only."""

    process_local = True

    def __init__(self, url: str) -> None:
        fs = MemoryFileSystem()
        super().__init__(url, fs, "/" + url[len("memory://") :].strip("/"))

    def __reduce__(self) -> tuple[Any, ...]:
        return (MemoryStorage, (self.url,))

    def put_if_absent(
        self, path: str, data: bytes, ready: Callable[[], None] | None = None
    ) -> bool:
        if ready is not None:
            ready()
        with _MEMORY_LOCK:
            if self.fs.exists(self._abs(path)):
                return False
            self.fs.pipe_file(self._abs(path), data)
            return True

    def delta_uri(self, path: str) -> str:
        return "memory://" + self._abs(path).lstrip("/")
