"""The storage root: one small interface over local disk, S3, HDFS and memory.

The log's correctness rests on one primitive, ``put_if_absent`` (an atomic
create, for Delta commits and topic pointers); there is deliberately no
exists()-then-write anywhere. Paths are root-relative with ``/``; ``..`` and
absolute paths are refused, so no user-supplied name can escape the root.
"""

from __future__ import annotations

import abc
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from lakelog.errors import InvalidRequestError

if TYPE_CHECKING:
    import pyarrow.fs


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One object under the root: its root-relative path, size and whether it is a directory."""

    path: str
    size: int
    is_dir: bool = False


def check_relative_path(path: str) -> str:
    """Normalise a root-relative path and refuse anything that could escape the root."""
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        raise InvalidRequestError(f"invalid storage path {path!r}: must be a relative path")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts) or not parts:
        raise InvalidRequestError(f"invalid storage path {path!r}: '..' is not allowed")
    return "/".join(parts)


def join(*parts: str) -> str:
    """Join root-relative path pieces with ``/``."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


class Storage(abc.ABC):
    """A storage root. Implementations must be picklable (Spark ships them to tasks)."""

    #: The URL this root was opened from, e.g. ``file:///data/lakelog`` or ``s3://b/prefix``.
    url: str
    #: True if another process opening the same URL would not see this root's files.
    process_local: bool = False

    @abc.abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """The whole object. Raises ``FileNotFoundError`` if it does not exist."""

    def read_many(self, paths: Sequence[str]) -> list[bytes | None]:
        """Several whole objects, in order; None for each one that does not exist.

        Object stores fetch them at once: a reader following a busy log one round trip
        at a time falls behind for good once commits come faster.
        """
        found: list[bytes | None] = []
        for path in paths:
            try:
                found.append(self.read_bytes(path))
            except FileNotFoundError:
                found.append(None)
        return found

    @abc.abstractmethod
    def put(self, path: str, data: bytes) -> None:
        """Write (or replace) an object atomically and durably: readers see all or nothing."""

    def write_new(self, path: str, write: Callable[[BinaryIO], None], *, sync: bool = True) -> int:
        """Stream a new object (a Parquet segment) durably; returns its size.

        No atomic visibility (a Delta commit publishes it). With ``sync=False`` a backend
        that has to flush may leave that to ``sync_new``, before which it must not be
        published.
        """
        buffer = io.BytesIO()
        write(buffer)
        data = buffer.getvalue()
        self.put(path, data)
        return len(data)

    def sync_new(self, paths: Sequence[str]) -> None:
        """Make objects written with ``write_new(sync=False)`` durable, names included
        (nothing to do on object stores: a completed upload is durable)."""
        return None

    @abc.abstractmethod
    def put_if_absent(
        self, path: str, data: bytes, ready: Callable[[], None] | None = None
    ) -> bool:
        """Create an object atomically; ``False`` (and no change) if it already exists.

        ``ready`` runs before the object can become visible; if it raises, nothing is
        published (a commit waits there for its segments' ``sync_new``).
        """

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Remove one object; a missing object is not an error."""

    @abc.abstractmethod
    def delete_tree(self, path: str) -> None:
        """Remove a directory and everything below it; missing is not an error."""

    @abc.abstractmethod
    def list_dir(self, path: str) -> list[FileInfo]:
        """Immediate children of a directory (empty if it does not exist), sorted by path."""

    @abc.abstractmethod
    def arrow_filesystem(self) -> pyarrow.fs.FileSystem:
        """A pyarrow filesystem for bulk Parquet reads, with paths from ``arrow_path``."""

    @abc.abstractmethod
    def arrow_path(self, path: str) -> str:
        """The path of a root-relative object on ``arrow_filesystem()``."""

    @abc.abstractmethod
    def delta_uri(self, path: str) -> str:
        """A URI delta-rs understands for a table under the root."""

    def delta_storage_options(self) -> dict[str, str]:
        """Options for delta-rs calls (checkpoint, vacuum) on this backend."""
        return {}

    def exists(self, path: str) -> bool:
        """Informational only: never use it to decide whether to write."""
        try:
            self.read_bytes(path)
        except FileNotFoundError:
            return False
        return True

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        """All objects below ``path``, depth first."""
        for info in self.list_dir(path):
            if info.is_dir:
                yield from self.walk_files(info.path)
            else:
                yield info

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        raise NotImplementedError  # pragma: no cover - every backend defines it
