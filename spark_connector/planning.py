"""Planning a read: pushed filters -> bounds, offset ranges -> Spark input partitions.

Pure logic (no I/O), so every decision here is unit-tested without Spark.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

from lakelog.offset_index import Segment
from lakelog.structs import TopicPartition

MAX_OFFSET = 2**63 - 1
MAX_PARTITION = 2**31 - 1
NEVER_NULL = frozenset({"topic", "partition", "offset", "timestamp", "timestampType"})


# -- snapshots and splits ----------------------------------------------------


@dataclass(frozen=True)
class PartitionSnapshot:
    """One partition as the driver saw it when planning."""

    topic: str
    table_path: str
    partition: int
    log_start: int
    high_watermark: int
    segments: tuple[Segment, ...]

    @property
    def key(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A segment as a task needs it: its path and covered offsets."""

    path: str
    base_offset: int
    last_offset: int

    @property
    def end_offset(self) -> int:
        return self.last_offset + 1

    def segment(self, partition: int) -> Segment:
        return Segment(self.base_offset, self.last_offset, self.path, partition)


@dataclass(frozen=True)
class ReadSplit(InputPartition):
    """One Spark input partition: offsets ``[start, end)`` of one partition, from ``segments``.

    Small and picklable: tasks open the storage root themselves.
    """

    topic: str
    table_path: str
    partition: int
    start: int
    end: int
    segments: tuple[SegmentRef, ...]
    estimated_records: int = 0


# -- filters -----------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(value: object) -> int | None:
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(microseconds=1)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class ScanBounds:
    """What pushed filters allow: half-open offsets and partitions, inclusive timestamps (us)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_range: tuple[int, int] = (0, MAX_PARTITION + 1)
    offsets: tuple[int, int] = (0, MAX_OFFSET)
    timestamps_us: tuple[int, int] | None = None

    def allows_topic(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics

    def allows_partition(self, partition: int) -> bool:
        lo, hi = self.partition_range
        return lo <= partition < hi and (self.partitions is None or partition in self.partitions)

    def allows_segment_times(self, segment: Segment) -> bool:
        """False only if no record of ``segment`` can pass the timestamp filters."""
        if self.timestamps_us is None:
            return True
        if segment.num_records > 0 and segment.min_timestamp_ms == segment.max_timestamp_ms == 0:
            return True  # no time statistics: cannot prune
        lo, hi = self.timestamps_us
        return segment.max_timestamp_ms * 1000 >= lo and segment.min_timestamp_ms * 1000 <= hi


def _range(current: tuple[int, int], op: Filter, value: int) -> tuple[int, int] | None:
    """Narrow a half-open ``[lo, hi)`` by one comparison, or None for an unknown filter."""
    lo, hi = current
    if isinstance(op, EqualTo | EqualNullSafe):
        return max(lo, value), min(hi, value + 1)
    if isinstance(op, GreaterThan):
        return max(lo, value + 1), hi
    if isinstance(op, GreaterThanOrEqual):
        return max(lo, value), hi
    if isinstance(op, LessThan):
        return lo, min(hi, value)
    if isinstance(op, LessThanOrEqual):
        return lo, min(hi, value + 1)
    return None


def _column(f: Filter) -> str | None:
    attribute = getattr(f, "attribute", None)
    if isinstance(attribute, tuple) and len(attribute) == 1 and isinstance(attribute[0], str):
        return attribute[0]
    return None


def push_filters(filters: Iterable[Filter]) -> tuple[ScanBounds, list[Filter]]:
    """Bounds from the filters this source can use, and the filters Spark must still apply.

    Returned filters are the very objects given (Spark matches them by identity).
    """
    bounds = ScanBounds()
    rest: list[Filter] = []
    for f in filters:
        pushed = _push_one(bounds, f)
        if pushed is None:
            rest.append(f)
            continue
        bounds, exact = pushed
        if not exact:
            rest.append(f)
    return bounds, rest


def _push_one(bounds: ScanBounds, f: Filter) -> tuple[ScanBounds, bool] | None:
    """(narrowed bounds, whether they capture ``f`` exactly), or None if ``f`` is not usable."""
    column = _column(f)
    if column is None:
        return None
    if isinstance(f, IsNotNull):
        return (bounds, True) if column in NEVER_NULL else None
    value = getattr(f, "value", None)
    listed: tuple[object, ...] = tuple(value) if isinstance(f, In) and value is not None else ()
    if column == "topic":
        if isinstance(f, EqualTo | EqualNullSafe) and isinstance(value, str):
            names = {value}
        elif isinstance(f, In) and all(isinstance(v, str) or v is None for v in listed):
            names = {v for v in listed if isinstance(v, str)}
        else:
            return None
        topics = frozenset(names if bounds.topics is None else bounds.topics & names)
        return replace(bounds, topics=topics), True
    if column in ("partition", "offset"):
        if isinstance(f, In):
            values = [_int(v) for v in listed if v is not None]
            ints = [v for v in values if v is not None]
            if len(ints) < len(values):
                return None
            if column == "partition":
                wanted = frozenset(ints)
                parts = wanted if bounds.partitions is None else bounds.partitions & wanted
                return replace(bounds, partitions=parts), True
            if not ints:
                return None
            lo, hi = bounds.offsets
            return replace(bounds, offsets=(max(lo, min(ints)), min(hi, max(ints) + 1))), False
        number = _int(value)
        current = bounds.partition_range if column == "partition" else bounds.offsets
        narrowed = None if number is None else _range(current, f, number)
        if narrowed is None:
            return None
        if column == "partition":
            return replace(bounds, partition_range=narrowed), True
        return replace(bounds, offsets=narrowed), True
    if column == "timestamp":
        micros = _micros(value)
        if micros is None or isinstance(f, In):
            return None
        lo, hi = bounds.timestamps_us or (-(2**63), 2**63 - 1)
        narrowed = _range((lo, hi + 1), f, micros)
        if narrowed is None:
            return None
        return replace(bounds, timestamps_us=(narrowed[0], narrowed[1] - 1)), False
    return None


# -- splits ------------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    segment: Segment
    start: int
    end: int
    records: int


def _pieces(
    snapshot: PartitionSnapshot, start: int, end: int, bounds: ScanBounds, cap: int
) -> Iterator[_Piece]:
    for segment in snapshot.segments:
        lo, hi = max(start, segment.base_offset), min(end, segment.end_offset)
        if lo >= hi or not bounds.allows_segment_times(segment):
            continue
        span = segment.end_offset - segment.base_offset
        records = math.ceil(segment.num_records * (hi - lo) / span) if span > 0 else 0
        chunks = max(1, math.ceil(records / cap))
        step = math.ceil((hi - lo) / chunks)
        for a in range(lo, hi, step):
            b = min(hi, a + step)
            yield _Piece(segment, a, b, math.ceil(records * (b - a) / (hi - lo)))


def _split(snapshot: PartitionSnapshot, pieces: list[_Piece]) -> ReadSplit:
    segments: dict[str, SegmentRef] = {}
    for piece in pieces:
        s = piece.segment
        segments.setdefault(s.path, SegmentRef(s.path, s.base_offset, s.last_offset))
    return ReadSplit(
        topic=snapshot.topic,
        table_path=snapshot.table_path,
        partition=snapshot.partition,
        start=pieces[0].start,
        end=pieces[-1].end,
        segments=tuple(segments.values()),
        estimated_records=sum(p.records for p in pieces),
    )


def plan_splits(
    ranges: Sequence[tuple[PartitionSnapshot, int, int]],
    bounds: ScanBounds | None = None,
    max_records: int = 1_000_000,
    min_partitions: int | None = None,
) -> list[ReadSplit]:
    """Input partitions covering, for each (snapshot, start, end), offsets ``[start, end)``."""
    bounds = bounds or ScanBounds()
    wanted = [
        (snap, max(start, bounds.offsets[0]), min(end, bounds.offsets[1]))
        for snap, start, end in ranges
        if bounds.allows_topic(snap.topic) and bounds.allows_partition(snap.partition)
    ]
    wanted = [(snap, start, end) for snap, start, end in wanted if start < end]
    cap = max(1, max_records)
    if min_partitions:
        total = sum(
            p.records for snap, start, end in wanted for p in _pieces(snap, start, end, bounds, cap)
        )
        cap = max(1, min(cap, math.ceil(total / min_partitions)))
    splits = []
    for snap, start, end in wanted:
        current: list[_Piece] = []
        records = 0
        for piece in _pieces(snap, start, end, bounds, cap):
            if current and records + piece.records > cap:
                splits.append(_split(snap, current))
                current, records = [], 0
            current.append(piece)
            records += piece.records
        if current:
            splits.append(_split(snap, current))
    return splits


# -- streaming ---------------------------------------------------------------


def rate_limit(
    backlog: Mapping[TopicPartition, int], max_offsets: int
) -> dict[TopicPartition, int]:
    """How many offsets each partition may advance, ``max_offsets`` in all, by backlog share.

    Every partition with a backlog gets at least one offset while the budget
    allows, so a small partition is never starved by a busy one; the rest is
    shared in proportion to backlog (largest remainders get the leftovers).
    """
    positive = {tp: n for tp, n in backlog.items() if n > 0}
    grant = {tp: 0 for tp in backlog}
    total = sum(positive.values())
    if total <= max_offsets:
        grant.update(positive)
        return grant
    budget = max_offsets
    order = sorted(positive)
    if budget >= len(order):
        grant.update(dict.fromkeys(order, 1))
        budget -= len(order)
    rest = {tp: positive[tp] - grant[tp] for tp in order}
    rest_total = sum(rest.values())
    if budget > 0 and rest_total > 0:
        shares = {tp: budget * n / rest_total for tp, n in rest.items()}
        floors = {tp: min(rest[tp], math.floor(s)) for tp, s in shares.items()}
        left = budget - sum(floors.values())
        by_remainder = sorted(order, key=lambda tp: (-(shares[tp] - floors[tp]), tp))
        for tp in by_remainder:
            if left <= 0:
                break
            if floors[tp] < rest[tp]:
                floors[tp] += 1
                left -= 1
        for tp, n in floors.items():
            grant[tp] += n
    return grant


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON: ``{"topic": {"0": next_offset}}``, in a stable order."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[TopicPartition(topic, partition)])
    return out


def offsets_from_json(obj: object) -> dict[TopicPartition, int]:
    if not isinstance(obj, dict):
        raise ValueError(f"streaming offsets must be a JSON object, got {obj!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise ValueError(f"streaming offsets of topic {topic!r} must be an object")
        for partition, offset in parts.items():
            out[TopicPartition(str(topic), int(partition))] = int(offset)
    return out
