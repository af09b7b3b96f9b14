"""Kafka's cleaning rules on real Spark: dirty ratio, min/max compaction lag, untouched head."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from compaction.compact import compact_topic
from compaction.planner import (
    active_segment,
    cleanable_segments,
    group_segments,
    plan_compaction,
    plan_merge,
    plan_retention,
)
from lakelog import Catalog, Record
from lakelog.offset_index import Segment
from lakelog.topic_config import TopicConfig
from tests.compaction.helpers import DAY, HOUR, MINUTE, T0, read_all


def _no_spark() -> SparkSession:
    raise AssertionError("a job with nothing to do must not start Spark")


def _keys(rows: list[tuple[int, int, bytes | None, bytes | None, int]]) -> list[tuple[int, bytes]]:
    return [(o, k or b"") for _, o, k, _, _ in rows]


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_dirty_ratio_lags_and_head(catalog: Catalog, spark: SparkSession) -> None:
    catalog.create_topic(
        "profiles", 1, {"cleanup.policy": "compact", "min.compaction.lag.ms": str(HOUR)}
    )
    log = catalog.topic("profiles")
    day = T0 + 10 * DAY

    def put(ts: int, *keys: str) -> None:
        log.append([Record(f"{k}@{ts}".encode(), key=k.encode(), timestamp_ms=ts) for k in keys])

    put(T0, "a", "b")  # offsets 0, 1
    put(T0 + 1, "a", "c")  # 2, 3
    put(T0 + 2, "b")  # 4
    put(day, "a", "c")  # 5, 6: young at `now`, protected by min.compaction.lag.ms
    put(day + 1, "a")  # 7: the newest segment
    now = day + 10 * MINUTE
    young, head = log.segments(0)[3:]

    # 1. Only the part older than min.compaction.lag.ms is cleaned; "a" at offset 2 stays
    #    although later "a"s exist, since those are not cleanable yet.
    report = compact_topic(catalog, "profiles", spark, now_ms=now)
    assert report.status == "ok" and report.records_in == 5 and report.records_out == 3
    assert _keys(read_all(log)) == [
        (2, b"a"),
        (3, b"c"),
        (4, b"b"),
        (5, b"a"),
        (6, b"c"),
        (7, b"a"),
    ]
    assert [s.path for s in log.segments(0)[-2:]] == [young.path, head.path]  # untouched
    assert log.log_start_offset(0) == 0  # the cleaned segment keeps covering 0..4

    # 2. Below min.cleanable.dirty.ratio nothing is due (and Spark is not even started).
    put(day + 2, "c")  # 8: the new head; offsets 5..7 are now dirty and cleanable later
    later = day + 2 + HOUR  # the head is exactly max.compaction.lag.ms old at step 3: active
    cleanable = log.segments(0)[:-1]
    dirty = sum(s.size_bytes for s in cleanable[1:])
    ratio = dirty / sum(s.size_bytes for s in cleanable)
    assert 0.3 < ratio < 0.95
    catalog.alter_topic_configs("profiles", {"min.cleanable.dirty.ratio": str(ratio + 0.04)})
    skipped = compact_topic(catalog, "profiles", _no_spark, now_ms=later)
    assert skipped.status == "skipped"

    # 3. ... unless a dirty record is older than max.compaction.lag.ms: then it is forced.
    catalog.alter_topic_configs("profiles", {"max.compaction.lag.ms": str(HOUR)})
    head = log.segments(0)[-1]
    forced = compact_topic(catalog, "profiles", spark, now_ms=later)
    assert forced.status == "ok" and "(forced)" in forced.message
    assert _keys(read_all(log)) == [(4, b"b"), (6, b"c"), (7, b"a"), (8, b"c")]
    assert log.segments(0)[-1].path == head.path  # the newest segment is never touched
    assert log.high_watermark(0) == 9 and log.log_start_offset(0) == 0
    # Fetching a compacted-away offset lands on the next record present (Kafka semantics).
    assert log.read(0, 0, max_records=1).records.column("offset").to_pylist() == [4]

    # 4. Once older than max.compaction.lag.ms, the head counts as rolled (Kafka's
    #    maxSegmentMs; Kafka would roll it at its next append) and is cleaned in turn.
    rolled = compact_topic(catalog, "profiles", spark, now_ms=later + DAY)
    assert rolled.status == "ok" and rolled.records_in == 4 and rolled.records_out == 3
    assert _keys(read_all(log)) == [(4, b"b"), (7, b"a"), (8, b"c")]

    # 5. Everything is clean now: nothing is due, even with max.compaction.lag.ms.
    assert compact_topic(catalog, "profiles", _no_spark, now_ms=later + DAY).status == "skipped"


def _seg(base: int, last: int, size: int, lo: int, hi: int, n: int = 1) -> Segment:
    return Segment(base, last, f"p/{base}", 0, size, n, lo, hi)


def test_planner_rules_without_spark() -> None:
    config = TopicConfig({"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.5"})
    segs = [
        _seg(0, 9, 100, T0, T0 + 1),
        _seg(10, 19, 100, T0 + 2, T0 + 3),
        _seg(20, 29, 100, T0 + 4, T0 + 5),
    ]
    # Nothing cleaned yet: both cleanable segments are dirty; the newest is never cleanable.
    plan = plan_compaction(0, segs, config, T0 + DAY, cleaned_up_to=0)
    assert plan is not None and [s.base_offset for s in plan.segments] == [0, 10]
    assert plan.cleaned_up_to == 20
    # Half dirty is exactly the ratio: due; a third is not.
    assert plan_compaction(0, segs, config, T0 + DAY, cleaned_up_to=10) is not None
    more = [*segs[:2], _seg(20, 29, 100, T0 + 4, T0 + 5), _seg(30, 39, 1, T0 + 6, T0 + 6)]
    assert plan_compaction(0, more, config, T0 + DAY, cleaned_up_to=20) is None
    assert plan_compaction(0, more, config, T0 + DAY, cleaned_up_to=20, force=True) is not None
    # Retention by time removes a prefix only; by size, the oldest first.
    kept = plan_retention(0, segs, TopicConfig({"retention.ms": "10"}), T0 + 14)
    assert kept is not None and [s.base_offset for s in kept.remove] == [0, 10]
    by_size = plan_retention(0, segs, TopicConfig({"retention.bytes": "150"}), T0)
    assert by_size is not None and by_size.new_log_start == 10


def test_empty_segments_do_not_break_merge_groups() -> None:
    """A segment emptied by compaction has no timestamps; it must not count as spanning 1970."""
    segs = [
        _seg(0, 9, 10, 0, 0, n=0),  # every record compacted away
        _seg(10, 19, 10, T0, T0 + 5),
        _seg(20, 29, 10, T0 + 6, T0 + 9),
    ]
    groups = group_segments(0, segs, target_bytes=1000, max_span_ms=DAY)
    assert [len(g.segments) for g in groups] == [3]
    assert [len(g.segments) for g in group_segments(0, segs, 1000, 5)] == [2, 1]


def test_the_newest_segment_is_active_only_within_kafkas_roll_limits() -> None:
    """Active = Kafka's open segment: the newest, until segment.bytes / segment.ms is passed."""
    segs = [_seg(0, 9, 100, T0, T0 + 1), _seg(10, 19, 100, T0 + 2, T0 + 3)]
    compacted = {"cleanup.policy": "compact"}
    fresh = T0 + 3 + HOUR  # default segment.ms is 7 days
    assert active_segment(segs, TopicConfig(compacted), fresh) == segs[-1]
    assert cleanable_segments(segs, TopicConfig(compacted), fresh) == segs[:1]
    # Older than segment.ms: Kafka would roll it at its next append; here it is rolled now.
    a_week = T0 + 3 + 7 * DAY + 1
    assert active_segment(segs, TopicConfig(compacted), a_week) is None
    assert cleanable_segments(segs, TopicConfig(compacted), a_week) == segs
    short = TopicConfig({**compacted, "segment.ms": str(HOUR)})
    assert active_segment(segs, short, T0 + 3 + HOUR) == segs[-1]
    assert active_segment(segs, short, T0 + 3 + HOUR + 1) is None
    # A smaller max.compaction.lag.ms rolls a compacted topic's segment sooner (maxSegmentMs).
    lagged = TopicConfig({**compacted, "max.compaction.lag.ms": str(MINUTE)})
    assert active_segment(segs, lagged, T0 + 3 + MINUTE + 1) is None
    assert active_segment(segs, TopicConfig({"max.compaction.lag.ms": str(MINUTE)}), fresh)
    # Full (segment.bytes reached) or empty: not active either.
    assert active_segment(segs, TopicConfig({**compacted, "segment.bytes": "100"}), fresh) is None
    assert (
        active_segment([segs[0], _seg(10, 19, 0, 0, 0, n=0)], TopicConfig(compacted), fresh) is None
    )


def test_merging_never_folds_the_active_segment() -> None:
    """Folding it would make one newest segment of old dirty records that nothing cleans."""
    segs = [_seg(i * 10, i * 10 + 9, 100, T0 + i, T0 + i) for i in range(4)]
    config = TopicConfig({"cleanup.policy": "compact"})
    (group,) = plan_merge(0, segs, config, now_ms=T0 + HOUR)
    assert group.segments == tuple(segs[:3])
    # Once rolled (past segment.ms), the newest is merged like any other segment.
    (group,) = plan_merge(0, segs, config, now_ms=T0 + 8 * DAY)
    assert group.segments == tuple(segs)
    # A partition whose only other segment is the active one has nothing to merge.
    assert plan_merge(0, segs[2:], config, now_ms=T0 + HOUR) == []
