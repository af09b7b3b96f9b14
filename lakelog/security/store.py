"""Versioned JSON documents in the storage root (ACLs, quota overrides).

A document is a series of snapshots ``<dir>/<version:020d>.json``, the highest
current. A change applies a pure function to the current snapshot and writes the
next version with **put-if-absent** (never exists()-then-write): of two
administrators changing it at once, the loser re-reads and re-applies its change.
Snapshots beyond ``keep`` are pruned after a write; readers read the newest
listed, so pruning never hides the current one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakelog.errors import ConcurrentCommitError, CorruptRecordError
from lakelog.storage import Storage, join

log = logging.getLogger(__name__)

SUFFIX = ".json"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One version of a document; version 0 with ``body=None`` means nothing stored yet."""

    version: int
    body: dict[str, Any] | None


def _version_of(path: str) -> int | None:
    name = path.rsplit("/", 1)[-1]
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
    return int(stem) if stem.isascii() and stem.isdigit() else None


class VersionedDocument:
    def __init__(self, storage: Storage, directory: str, *, keep: int = 20) -> None:
        self.storage = storage
        self.directory = directory
        self.keep = keep

    def _path(self, version: int) -> str:
        return join(self.directory, f"{version:020d}{SUFFIX}")

    def versions(self) -> list[int]:
        found = (_version_of(e.path) for e in self.storage.list_dir(self.directory))
        return sorted(v for v in found if v is not None)

    def read(self, version: int) -> Snapshot:
        path = self._path(version)
        data = self.storage.read_bytes(path)
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise CorruptRecordError(f"{path} is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise CorruptRecordError(f"{path} must hold a JSON object")
        return Snapshot(version, body)

    def latest(self, newer_than: int = 0) -> Snapshot:
        """The newest snapshot; ``Snapshot(newer_than, None)`` if none is newer than that."""
        versions = self.versions()
        if not versions or versions[-1] <= newer_than:
            return Snapshot(newer_than, None)
        return self.read(versions[-1])

    def update(
        self,
        change: Callable[[dict[str, Any] | None], dict[str, Any]],
        *,
        attempts: int = 50,
    ) -> Snapshot:
        """Apply ``change`` to the current body and store it as the next version.

        ``change`` must be pure: it runs again on the newer body when another
        writer got the next version first.
        """
        for _ in range(attempts):
            current = self.latest()
            body = dict(change(current.body))
            body["written_ms"] = int(time.time() * 1000)
            version = current.version + 1
            data = json.dumps(body, sort_keys=True, indent=1).encode()
            if self.storage.put_if_absent(self._path(version), data):
                self._prune(version)
                return Snapshot(version, body)
        raise ConcurrentCommitError(
            f"{self.directory}: gave up after {attempts} attempts; other writers kept winning"
        )

    def _prune(self, newest: int) -> None:
        for version in self.versions():
            if version <= newest - self.keep:
                try:
                    self.storage.delete(self._path(version))
                except OSError as exc:
                    log.warning("could not prune %s (harmless): %s", self._path(version), exc)
