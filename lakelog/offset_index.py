"""The offset manifest as an in-memory index: per partition, its segments in offset order.

Pure logic. Built from the Delta snapshot's add actions and kept current by
applying each new commit's adds and removes, so a fetch finds the segment that
holds an offset by bisection instead of scanning the table. A segment's
offset range comes from its ``lakelog.*`` tags (falling back to the Parquet
stats for files written by other tools): after compaction a segment keeps the
range it covered even though some offsets inside are gone, which is what keeps
the log start offset where Kafka would keep it.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from lakelog.delta.actions import Action, AddFile, RemoveFile

TAG_BASE = "lakelog.baseOffset"
TAG_LAST = "lakelog.lastOffset"
TAG_RECORDS = "lakelog.records"
TAG_MIN_TS = "lakelog.minTimestamp"
TAG_MAX_TS = "lakelog.maxTimestamp"


@dataclass(frozen=True, slots=True, order=True)
class Segment:
    """One Parquet file of one partition, covering offsets ``base_offset..last_offset``."""

    base_offset: int
    last_offset: int
    path: str = field(compare=False)
    partition: int = field(compare=False)
    size_bytes: int = field(compare=False, default=0)
    num_records: int = field(compare=False, default=0)
    min_timestamp_ms: int = field(compare=False, default=0)
    max_timestamp_ms: int = field(compare=False, default=0)
    modification_time: int = field(compare=False, default=0)

    @property
    def end_offset(self) -> int:
        """One past the last offset the segment covers."""
        return self.last_offset + 1

    def tags(self) -> dict[str, str]:
        return {
            TAG_BASE: str(self.base_offset),
            TAG_LAST: str(self.last_offset),
            TAG_RECORDS: str(self.num_records),
            TAG_MIN_TS: str(self.min_timestamp_ms),
            TAG_MAX_TS: str(self.max_timestamp_ms),
        }


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def stats_timestamp(ms: int) -> str:
    """Delta stats timestamp text; integer arithmetic so no millisecond is lost to floats."""
    moment = _EPOCH + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _stats_millis(value: object) -> int:
    if isinstance(value, int | float):
        return int(value)
    parsed = datetime.fromisoformat(str(value))  # Python 3.11 reads a "Z" suffix
    # Integer arithmetic: ``int(parsed.timestamp() * 1000)`` would go through a float and
    # truncate (1000 for "...T00:00:01.001Z"). No zone means UTC, never local time.
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return (parsed - _EPOCH) // timedelta(milliseconds=1)


def segment_from_add(add: AddFile) -> Segment:
    """The segment an add action describes (tags first, stats as the fallback)."""
    partition = int(add.partition_values.get("partition") or 0)
    tags = add.tags
    if TAG_BASE in tags and TAG_LAST in tags:
        base, last = int(tags[TAG_BASE]), int(tags[TAG_LAST])
        records = int(tags.get(TAG_RECORDS, "0"))
        earliest, latest = int(tags.get(TAG_MIN_TS, "0")), int(tags.get(TAG_MAX_TS, "0"))
    else:
        stats = json.loads(add.stats or "{}")
        lo, hi = stats.get("minValues", {}), stats.get("maxValues", {})
        if "offset" not in lo or "offset" not in hi:
            raise ValueError(f"segment {add.path} has neither lakelog tags nor offset statistics")
        base, last = int(lo["offset"]), int(hi["offset"])
        records = int(stats.get("numRecords", 0))
        earliest = _stats_millis(lo.get("timestamp", 0))
        latest = _stats_millis(hi.get("timestamp", 0))
    return Segment(
        base_offset=base,
        last_offset=last,
        path=add.path,
        partition=partition,
        size_bytes=add.size,
        num_records=records,
        min_timestamp_ms=earliest,
        max_timestamp_ms=latest,
        modification_time=add.modification_time,
    )


class PartitionIndex:
    """The live segments of one partition, sorted by offset and non-overlapping."""

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        self._segments = sorted(segments)
        self._lasts = [s.last_offset for s in self._segments]

    def add(self, segment: Segment) -> None:
        i = bisect.bisect_left(self._segments, segment)
        self._segments.insert(i, segment)
        self._lasts.insert(i, segment.last_offset)

    def remove(self, path: str) -> Segment | None:
        for i, seg in enumerate(self._segments):
            if seg.path == path:
                del self._segments[i]
                del self._lasts[i]
                return seg
        return None

    def __iter__(self) -> Iterator[Segment]:
        return iter(self._segments)

    def __len__(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    def log_start_offset(self, high_watermark: int) -> int:
        """First offset still covered, or the high watermark when nothing is left."""
        return self._segments[0].base_offset if self._segments else high_watermark

    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    def segments_from(self, offset: int) -> list[Segment]:
        """Segments that may hold records at or after ``offset``, in order."""
        i = bisect.bisect_left(self._lasts, offset)
        return self._segments[i:]

    def segments_for_timestamp(self, timestamp_ms: int) -> list[Segment]:
        """Segments from the first one that has a record at or after ``timestamp_ms``."""
        for i, seg in enumerate(self._segments):
            if seg.max_timestamp_ms >= timestamp_ms:
                return self._segments[i:]
        return []


class OffsetIndex:
    """Per-partition segment indexes for a whole table, updated commit by commit."""

    def __init__(self) -> None:
        self._partitions: defaultdict[int, PartitionIndex] = defaultdict(PartitionIndex)
        self._partition_of: dict[str, int] = {}

    @classmethod
    def from_adds(cls, adds: Iterable[AddFile]) -> OffsetIndex:
        """Bulk build (opening a table): group by partition and sort once."""
        index = cls()
        grouped: dict[int, list[Segment]] = {}
        for add in adds:
            segment = segment_from_add(add)
            grouped.setdefault(segment.partition, []).append(segment)
            index._partition_of[segment.path] = segment.partition
        for partition, segments in grouped.items():
            index._partitions[partition] = PartitionIndex(segments)
        return index

    def apply(self, actions: Iterable[Action]) -> None:
        """Fold one commit's adds and removes into the index, in commit order.

        Within a merge or compaction commit the new segment briefly overlaps
        the ones it replaces; callers read the index only between commits.
        """
        for action in actions:
            if isinstance(action, RemoveFile):
                partition = self._partition_of.pop(action.path, None)
                if partition is not None:
                    self._partitions[partition].remove(action.path)
            elif isinstance(action, AddFile):
                segment = segment_from_add(action)
                # In Delta an add of a path that is already live replaces the earlier
                # add (as TableState.files does): one segment per path, so a later
                # remove takes it out entirely.
                previous = self._partition_of.get(segment.path)
                if previous is not None:
                    self._partitions[previous].remove(segment.path)
                self.partition(segment.partition).add(segment)
                self._partition_of[segment.path] = segment.partition

    def partition(self, partition: int) -> PartitionIndex:
        return self._partitions[partition]

    def contains(self, path: str) -> bool:
        return path in self._partition_of
