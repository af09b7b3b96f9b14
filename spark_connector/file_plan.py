"""Which segment files a native batch scan lists, and which rows of them it must keep (pure).

A segment wholly inside a partition's offset range needs no row filter; one
that straddles a bound needs ``offset`` compared row by row, which Spark does
in the scan, skipping row groups by their Parquet statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spark_connector.planning import PartitionSnapshot


@dataclass(frozen=True)
class PartitionFiles:
    """The files of one partition holding offsets ``[start, end)``, relative to its table."""

    partition: int
    start: int
    end: int
    paths: tuple[str, ...]
    #: False when some file holds offsets outside ``[start, end)``: rows must be filtered.
    exact: bool


@dataclass(frozen=True)
class TopicFiles:
    """The files of one topic's table a scan reads."""

    topic: str
    table_path: str
    partitions: tuple[PartitionFiles, ...]

    @property
    def exact(self) -> bool:
        return all(p.exact for p in self.partitions)


def partition_files(snapshot: PartitionSnapshot, start: int, end: int) -> PartitionFiles | None:
    """The segments of ``snapshot`` overlapping ``[start, end)``, or None if none do."""
    if start >= end:
        return None
    chosen = [s for s in snapshot.segments if s.base_offset < end and s.end_offset > start]
    if not chosen:
        return None
    exact = all(start <= s.base_offset and s.end_offset <= end for s in chosen)
    return PartitionFiles(snapshot.partition, start, end, tuple(s.path for s in chosen), exact)


def plan_files(
    snapshots: Sequence[PartitionSnapshot], ranges: dict[tuple[str, int], tuple[int, int]]
) -> list[TopicFiles]:
    """Per topic (in the order first seen), the files covering each partition's range."""
    by_topic: dict[str, tuple[str, list[PartitionFiles]]] = {}
    for snap in snapshots:
        start, end = ranges[snap.key]
        files = partition_files(snap, start, end)
        entry = by_topic.setdefault(snap.topic, (snap.table_path, []))
        if files is not None:
            entry[1].append(files)
    return [
        TopicFiles(topic, table_path, tuple(parts))
        for topic, (table_path, parts) in by_topic.items()
    ]
