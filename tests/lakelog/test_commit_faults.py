"""Commit writes that fail in transit: the log must neither lose nor duplicate a batch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakelog import Catalog, Record
from lakelog.errors import AmbiguousCommitError, KafkaStorageError
from lakelog.storage.local import LocalStorage


class FlakyCommits(LocalStorage):
    """A local root whose next commit PUT reports failure, after writing (or not)."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.fail_next_commit: str | None = None  # "after-write" | "before-write"
        self.fail_reads = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (FlakyCommits, (self.directory,))

    def put_if_absent(
        self, path: str, data: bytes, ready: Callable[[], None] | None = None
    ) -> bool:
        mode, self.fail_next_commit = self.fail_next_commit, None
        if mode == "before-write" and "_delta_log" in path:
            raise OSError("connection reset before the write")
        written = super().put_if_absent(path, data, ready)
        if mode == "after-write" and "_delta_log" in path:
            raise OSError("connection reset after the write")
        return written

    def read_bytes(self, path: str) -> bytes:
        if self.fail_reads and "_delta_log" in path:
            raise OSError("storage unreachable")
        return super().read_bytes(path)


def _setup(tmp_path: Path) -> tuple[FlakyCommits, Catalog]:
    storage = FlakyCommits(str(tmp_path / "root"))
    catalog = Catalog(storage)
    catalog.create_topic("t", 1)
    catalog.topic("t").append([Record(b"first")])
    return storage, catalog


def test_put_that_landed_counts_as_committed(tmp_path: Path) -> None:
    storage, catalog = _setup(tmp_path)
    storage.fail_next_commit = "after-write"
    result = catalog.topic("t").append([Record(b"second")])
    assert result.offsets == [1]
    reader = Catalog(str(tmp_path / "root")).topic("t")
    assert [r.value for r in reader.read(0, 0).to_records("t")] == [b"first", b"second"]


def test_put_that_did_not_land_is_a_retriable_error(tmp_path: Path) -> None:
    storage, catalog = _setup(tmp_path)
    storage.fail_next_commit = "before-write"
    with pytest.raises(KafkaStorageError) as info:
        catalog.topic("t").append([Record(b"lost")])
    assert info.value.retriable
    log = catalog.topic("t")
    assert log.high_watermark(0) == 1
    assert log.append([Record(b"again")]).offsets == [1]


def test_unknown_outcome_keeps_the_segment_files(tmp_path: Path) -> None:
    storage, catalog = _setup(tmp_path)
    log = catalog.topic("t")
    storage.fail_next_commit = "after-write"
    storage.fail_reads = True
    with pytest.raises(AmbiguousCommitError) as info:
        log.append([Record(b"maybe")])
    assert info.value.retriable
    storage.fail_reads = False
    reader = Catalog(str(tmp_path / "root")).topic("t")
    # The commit did land, and its segment is still there to be read.
    assert [r.value for r in reader.read(0, 0).to_records("t")] == [b"first", b"maybe"]
