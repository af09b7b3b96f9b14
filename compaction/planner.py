"""What each maintenance job would do to a partition (pure logic, no I/O, no Spark).

Kafka's rules (the active segment, the dirty ratio, the lags, retention by
time and size, merge targets) decided from segment lists, the topic config and
the clock, so they are testable without a cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.offset_index import Segment
from lakelog.topic_config import TopicConfig


@dataclass(frozen=True)
class SegmentGroup:
    """Consecutive segments rewritten into one new segment covering the same offsets."""

    partition: int
    segments: tuple[Segment, ...]

    @property
    def base_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def last_offset(self) -> int:
        return self.segments[-1].last_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments)

    @property
    def num_records(self) -> int:
        return sum(s.num_records for s in self.segments)


@dataclass(frozen=True)
class CompactionPlan:
    """Clean ``groups`` of one partition; ``cleaned_up_to`` becomes its first dirty offset."""

    partition: int
    groups: tuple[SegmentGroup, ...]
    cleaned_up_to: int
    dirty_ratio: float
    forced: bool

    @property
    def segments(self) -> list[Segment]:
        return [s for g in self.groups for s in g.segments]


@dataclass(frozen=True)
class RetentionPlan:
    partition: int
    remove: tuple[Segment, ...]
    reason: str

    @property
    def new_log_start(self) -> int:
        return self.remove[-1].end_offset


def group_segments(
    partition: int, segments: Sequence[Segment], target_bytes: int, max_span_ms: int
) -> list[SegmentGroup]:
    """Split consecutive segments into groups of at most ``target_bytes``/``max_span_ms``.

    Groups never mix non-adjacent ranges, so every output segment covers one
    contiguous offset range, exactly as its inputs did together.
    """
    groups: list[SegmentGroup] = []
    current: list[Segment] = []
    size = 0
    for segment in segments:
        if current:
            contiguous = segment.base_offset == current[-1].end_offset
            # Empty segments (everything in them was compacted away) have no
            # timestamps; counting their 0 would make every span look huge.
            stamped = [s for s in (*current, segment) if s.num_records > 0]
            span = (
                max(s.max_timestamp_ms for s in stamped) - min(s.min_timestamp_ms for s in stamped)
                if stamped
                else 0
            )
            if not contiguous or size + segment.size_bytes > target_bytes or span > max_span_ms:
                groups.append(SegmentGroup(partition, tuple(current)))
                current, size = [], 0
        current.append(segment)
        size += segment.size_bytes
    if current:
        groups.append(SegmentGroup(partition, tuple(current)))
    return groups


def max_segment_ms(config: TopicConfig) -> int:
    """How long a segment stays open for appends: Kafka's ``LogConfig.maxSegmentMs``.

    segment.ms, or max.compaction.lag.ms when a compacted topic sets a smaller
    one, so that a record can always be cleaned within that lag.
    """
    segment_ms = int(config.get("segment.ms"))
    max_lag = int(config.get("max.compaction.lag.ms"))
    if config.compacted and max_lag > 0:
        return min(segment_ms, max_lag)
    return segment_ms


def active_segment(segments: Sequence[Segment], config: TopicConfig, now_ms: int) -> Segment | None:
    """The partition's active segment: its newest one, until Kafka would have rolled it.

    Every lakelog append writes a sealed segment, so the newest plays Kafka's
    open segment while under segment.bytes and ``max_segment_ms``, and counts
    as rolled once past them without waiting for another append; so merging
    cannot strand records that no cleaning pass reaches until new data arrives.
    """
    if not segments:
        return None
    newest = segments[-1]
    if newest.num_records == 0 or newest.size_bytes >= int(config.get("segment.bytes")):
        return None
    if now_ms - newest.max_timestamp_ms > max_segment_ms(config):
        return None
    return newest


def rolled_segments(segments: Sequence[Segment], config: TopicConfig, now_ms: int) -> list[Segment]:
    """Every segment but the active one: what compaction and merging may rewrite."""
    if active_segment(segments, config, now_ms) is None:
        return list(segments)
    return list(segments)[:-1]


def cleanable_segments(
    segments: Sequence[Segment], config: TopicConfig, now_ms: int
) -> list[Segment]:
    """The tail compaction may touch: not the active segment, nothing younger than the lag.

    Stops at the first segment that is too young, so the cleanable range is
    always a prefix of the log and the head stays byte-for-byte untouched.
    """
    lag = int(config.get("min.compaction.lag.ms"))
    result = []
    for segment in rolled_segments(segments, config, now_ms):
        if segment.max_timestamp_ms > now_ms - lag:
            break
        result.append(segment)
    return result


def plan_compaction(
    partition: int,
    segments: Sequence[Segment],
    config: TopicConfig,
    now_ms: int,
    cleaned_up_to: int,
    force: bool = False,
) -> CompactionPlan | None:
    """Kafka's choice of whether and what to clean in one partition.

    ``cleaned_up_to`` is the first offset not yet cleaned. The partition is
    cleaned when its dirty share of the cleanable bytes reaches
    min.cleanable.dirty.ratio, or when a dirty record is older than
    max.compaction.lag.ms, or when forced (which also re-cleans an already
    clean tail, e.g. to drop tombstones past delete.retention.ms).
    """
    if not config.compacted:
        return None
    cleanable = cleanable_segments(segments, config, now_ms)
    if not cleanable:
        return None
    total = sum(s.size_bytes for s in cleanable) or 1
    dirty = [s for s in cleanable if s.last_offset >= cleaned_up_to]
    if not dirty and not force:
        return None
    ratio = sum(s.size_bytes for s in dirty) / total
    max_lag = int(config.get("max.compaction.lag.ms"))
    overdue = bool(dirty) and min(s.min_timestamp_ms for s in dirty) < now_ms - max_lag
    if not (force or overdue or ratio >= float(config.get("min.cleanable.dirty.ratio"))):
        return None
    groups = group_segments(
        partition, cleanable, int(config.get("segment.bytes")), int(config.get("segment.ms"))
    )
    return CompactionPlan(
        partition=partition,
        groups=tuple(groups),
        cleaned_up_to=cleanable[-1].end_offset,
        dirty_ratio=ratio,
        forced=force or (overdue and ratio < float(config.get("min.cleanable.dirty.ratio"))),
    )


def plan_retention(
    partition: int, segments: Sequence[Segment], config: TopicConfig, now_ms: int
) -> RetentionPlan | None:
    """Whole segments past retention.ms (by their newest record) or beyond retention.bytes.

    Only a prefix of the log is ever removed, so the log start offset just
    moves forward, as in Kafka.
    """
    if "delete" not in config.cleanup_policy:
        return None
    retention_ms = int(config.get("retention.ms"))
    retention_bytes = int(config.get("retention.bytes"))
    ordered = list(segments)
    remove: list[Segment] = []
    reasons = set()
    if retention_ms >= 0:
        for segment in ordered:
            if segment.max_timestamp_ms >= now_ms - retention_ms:
                break
            remove.append(segment)
            reasons.add("retention.ms")
    if retention_bytes >= 0:
        remaining = sum(s.size_bytes for s in ordered[len(remove) :])
        for segment in ordered[len(remove) :]:
            if remaining - segment.size_bytes < retention_bytes:
                break
            remove.append(segment)
            remaining -= segment.size_bytes
            reasons.add("retention.bytes")
    if not remove:
        return None
    return RetentionPlan(partition, tuple(remove), "+".join(sorted(reasons)))


def plan_merge(
    partition: int, segments: Sequence[Segment], config: TopicConfig, now_ms: int
) -> list[SegmentGroup]:
    """Runs of small rolled segments to merge; single-segment groups need no work.

    The active segment is never folded in: a merged segment holding it would
    itself be the newest, and old dirty records would ride along into the one
    segment no cleaning pass reads.
    """
    groups = group_segments(
        partition,
        rolled_segments(segments, config, now_ms),
        int(config.get("segment.bytes")),
        int(config.get("segment.ms")),
    )
    return [g for g in groups if len(g.segments) > 1]
