"""Local-directory storage root (also ``file://``).

put_if_absent is a hard link of a fully written and fsynced temporary file:
``link`` fails atomically when the target exists, so a crash can never leave a
half-written commit file behind and two writers can never both win.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO

import pyarrow
import pyarrow.fs

from lakelog.storage.base import FileInfo, Storage, check_relative_path

_WRITE_BUFFER_BYTES = 4 << 20


def _fsync(path: str) -> None:
    """fsync a file, or a directory (which makes the names in it durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _removed_on_failure(path: str) -> Iterator[None]:
    """Unlink ``path`` if the block fails: list_dir hides ``.tmp-`` names, so a failed
    write's file would never be noticed or removed."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


class LocalStorage(Storage):
    """A storage root in a local (or NFS/HDFS-fuse mounted) directory."""

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        self.url = "file://" + self.directory

    def __reduce__(self) -> tuple[Any, ...]:
        return (LocalStorage, (self.directory,))

    def _abs(self, path: str) -> str:
        return os.path.join(self.directory, check_relative_path(path))

    def _write_temp(self, target: str, data: bytes) -> str:
        parent = os.path.dirname(target)
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".tmp-{uuid.uuid4().hex}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with _removed_on_failure(tmp):
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
        return tmp

    def read_bytes(self, path: str) -> bytes:
        # A directory, or a path below a plain file, is "no such object" too, as on S3:
        # the contract (and ``exists``) only knows FileNotFoundError.
        try:
            with open(self._abs(path), "rb") as f:
                return f.read()
        except (IsADirectoryError, NotADirectoryError) as exc:
            raise FileNotFoundError(exc.errno, exc.strerror, exc.filename) from exc

    def put(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        tmp = self._write_temp(target, data)
        with _removed_on_failure(tmp):
            os.replace(tmp, target)
        _fsync(os.path.dirname(target))

    def write_new(self, path: str, write: Callable[[BinaryIO], None], *, sync: bool = True) -> int:
        """Write in place under the final name: one copy, no rename; fsync file and directory.

        ``write`` gets a pyarrow native file, so Parquet streams into the OS file. The
        name is reserved with ``O_EXCL``: an existing object is never overwritten.
        """
        target = self._abs(path)
        parent = os.path.dirname(target)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(target, flags, 0o644)
        except FileNotFoundError:  # first file of a new directory (partition)
            os.makedirs(parent, exist_ok=True)
            fd = os.open(target, flags, 0o644)
        with _removed_on_failure(target):
            try:
                # Buffered: a Parquet writer makes dozens of small writes per file, each a
                # syscall that gives up the GIL and waits to get it back on a busy broker.
                with pyarrow.BufferedOutputStream(
                    pyarrow.OSFile(target, "wb"), _WRITE_BUFFER_BYTES
                ) as sink:
                    write(sink)
                    size = int(sink.tell())
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        if sync:
            _fsync(parent)
        return size

    def sync_new(self, paths: Sequence[str]) -> None:
        """fsync each file, then each directory holding one (its name is durable too)."""
        targets = [self._abs(path) for path in paths]
        for target in targets:
            _fsync(target)
        for parent in dict.fromkeys(os.path.dirname(t) for t in targets):
            _fsync(parent)

    def put_if_absent(
        self, path: str, data: bytes, ready: Callable[[], None] | None = None
    ) -> bool:
        target = self._abs(path)
        tmp = self._write_temp(target, data)
        try:
            if ready is not None:
                ready()
            os.link(tmp, target)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        _fsync(os.path.dirname(target))
        return True

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._abs(path))

    def delete_tree(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self._abs(path))

    def list_dir(self, path: str) -> list[FileInfo]:
        rel = check_relative_path(path)
        try:
            entries = list(os.scandir(self._abs(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        infos = []
        for entry in entries:
            if entry.name.startswith(".tmp-"):
                continue
            is_dir = entry.is_dir()
            try:
                size = 0 if is_dir else entry.stat().st_size
            except FileNotFoundError:
                # Deleted (retention, compaction, another client) between scandir
                # and stat: it is simply no longer a child, not an error.
                continue
            infos.append(FileInfo(f"{rel}/{entry.name}", size, is_dir))
        return sorted(infos, key=lambda i: i.path)

    def arrow_filesystem(self) -> pyarrow.fs.FileSystem:
        return pyarrow.fs.LocalFileSystem()

    def arrow_path(self, path: str) -> str:
        return self._abs(path)

    def delta_uri(self, path: str) -> str:
        return self._abs(path)
