"""The registry's event log in the storage root: ``_meta/schemas/<seq:020d>.json``.

Event N is written with put-if-absent by a writer that folded events 1..N-1 and
validated its change against that state; of two brokers writing N at once one
wins and the other re-reads, re-validates and tries N+1. So every broker sharing
the root folds the same events in the same order. Readers follow the log by
reading the next numbers until one is missing (no listing: an object store lists
slowly and, on some, not at once after a write).
"""

from __future__ import annotations

import json
from typing import Any

from lakelog.errors import CorruptRecordError
from lakelog.storage import Storage, join

DIRECTORY = "_meta/schemas"
#: The most events read in one round trip while catching up.
MAX_BATCH = 64


class SchemaLog:
    def __init__(self, storage: Storage, directory: str = DIRECTORY) -> None:
        self.storage = storage
        self.directory = directory

    def path(self, seq: int) -> str:
        return join(self.directory, f"{seq:020d}.json")

    def read_after(self, seq: int) -> list[tuple[int, dict[str, Any]]]:
        """The events after ``seq``, in order, up to the first missing number.

        One read when nothing is new (the common case); a reader far behind reads
        ever larger batches at once.
        """
        found: list[tuple[int, dict[str, Any]]] = []
        batch = 1
        while True:
            numbers = range(seq + 1, seq + 1 + batch)
            blobs = self.storage.read_many([self.path(n) for n in numbers])
            for number, blob in zip(numbers, blobs, strict=True):
                if blob is None:
                    return found
                found.append((number, self._decode(number, blob)))
            seq += batch
            batch = min(batch * 4, MAX_BATCH)

    def _decode(self, seq: int, blob: bytes) -> dict[str, Any]:
        try:
            event = json.loads(blob)
        except ValueError as exc:
            raise CorruptRecordError(f"{self.path(seq)} is not valid JSON: {exc}") from None
        if not isinstance(event, dict):
            raise CorruptRecordError(f"{self.path(seq)} must hold a JSON object")
        return event

    def append(self, seq: int, event: dict[str, Any]) -> bool:
        """Store event ``seq``; False if another writer stored that number first."""
        data = json.dumps(event, sort_keys=True, separators=(",", ":")).encode()
        return self.storage.put_if_absent(self.path(seq), data)
