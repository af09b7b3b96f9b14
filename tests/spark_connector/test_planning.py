"""Planning (pure): pushed filters, input partitions, rate limits, offset JSON."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from lakelog.offset_index import Segment
from lakelog.structs import TopicPartition as TP
from spark_connector.planning import (
    PartitionSnapshot,
    ReadSplit,
    ScanBounds,
    offsets_from_json,
    offsets_to_json,
    plan_splits,
    push_filters,
    rate_limit,
)

T0 = 1_700_000_000_000  # ms


def segments(partition: int, sizes: list[int], ts_step: int = 1000) -> tuple[Segment, ...]:
    """Consecutive segments with the given record counts; segment i's records at T0 + i*step."""
    out, base = [], 0
    for i, n in enumerate(sizes):
        out.append(
            Segment(
                base,
                base + n - 1,
                f"partition={partition}/{base:020d}.parquet",
                partition,
                num_records=n,
                min_timestamp_ms=T0 + i * ts_step,
                max_timestamp_ms=T0 + i * ts_step + ts_step - 1,
            )
        )
        base += n
    return tuple(out)


def snapshot(partition: int, sizes: list[int], topic: str = "t") -> PartitionSnapshot:
    segs = segments(partition, sizes)
    hwm = segs[-1].end_offset if segs else 0
    return PartitionSnapshot(topic, "topics/t/id", partition, 0, hwm, segs)


def full(*snaps: PartitionSnapshot) -> list[tuple[PartitionSnapshot, int, int]]:
    return [(s, s.log_start, s.high_watermark) for s in snaps]


def covered(splits: list[ReadSplit]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for s in splits:
        out.setdefault((s.topic, s.partition), []).append((s.start, s.end))
    return out


def us(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


# -- filters -----------------------------------------------------------------


def test_partition_and_offset_filters_are_exact() -> None:
    filters = [
        IsNotNull(("partition",)),
        EqualTo(("partition",), 1),
        GreaterThanOrEqual(("offset",), 10),
        LessThan(("offset",), 20),
    ]
    bounds, rest = push_filters(filters)
    assert rest == []
    assert bounds.allows_partition(1) and not bounds.allows_partition(0)
    assert bounds.offsets == (10, 20)
    bounds, rest = push_filters([In(("partition",), (0, 2)), GreaterThan(("partition",), 0)])
    assert rest == [] and [p for p in range(4) if bounds.allows_partition(p)] == [2]
    bounds, _ = push_filters([GreaterThan(("offset",), 5), LessThanOrEqual(("offset",), 7)])
    assert bounds.offsets == (6, 8)


def test_topic_filters() -> None:
    bounds, rest = push_filters([In(("topic",), ("a", "b")), EqualTo(("topic",), "b")])
    assert rest == [] and bounds.topics == frozenset({"b"})


def test_timestamp_and_offset_in_filters_prune_but_go_back_to_spark() -> None:
    ts = GreaterThanOrEqual(("timestamp",), us(T0 + 2000))
    offset_in = In(("offset",), (5, 100))
    bounds, rest = push_filters([ts, offset_in])
    assert rest == [ts, offset_in]  # the same objects: Spark matches them by identity
    assert bounds.timestamps_us is not None and bounds.timestamps_us[0] == (T0 + 2000) * 1000
    assert bounds.offsets == (5, 101)


def test_unusable_filters_are_returned() -> None:
    filters = [
        EqualTo(("value",), b"x"),
        Not(EqualTo(("partition",), 1)),
        IsNull(("key",)),
        StringStartsWith(("topic",), "or"),
        EqualTo(("partition",), "1"),  # not an int: leave it to Spark
        EqualTo(("partition",), True),
        EqualTo(("headers", "key"), "h"),
    ]
    bounds, rest = push_filters(filters)
    assert rest == filters
    assert bounds == ScanBounds()


# -- splits ------------------------------------------------------------------


def test_one_split_per_segment_range_packed_up_to_the_cap() -> None:
    snap = snapshot(0, [100] * 10)
    assert len(plan_splits(full(snap), max_records=1000)) == 1
    splits = plan_splits(full(snap), max_records=300)
    assert [(s.start, s.end) for s in splits] == [(0, 300), (300, 600), (600, 900), (900, 1000)]
    assert [len(s.segments) for s in splits] == [3, 3, 3, 1]
    assert sum(s.estimated_records for s in splits) == 1000


def test_large_segments_are_split_by_offset_range() -> None:
    snap = snapshot(0, [1000, 50])
    splits = plan_splits(full(snap), max_records=300)
    assert [(s.start, s.end) for s in splits] == [
        (0, 250),
        (250, 500),
        (500, 750),
        (750, 1050),  # the last piece of the big segment and the small one fit together
    ]
    assert [len(s.segments) for s in splits] == [1, 1, 1, 2]
    assert all(s.estimated_records <= 300 for s in splits)


def test_ranges_are_cut_to_start_and_end() -> None:
    snap = snapshot(0, [100, 100, 100])
    (split,) = plan_splits([(snap, 150, 220)], max_records=1000)
    assert (split.start, split.end) == (150, 220)
    assert [r.base_offset for r in split.segments] == [100, 200]
    assert plan_splits([(snap, 300, 300)]) == []


def test_min_partitions_splits_further() -> None:
    snap = snapshot(0, [100] * 4)
    assert len(plan_splits(full(snap), max_records=10_000)) == 1
    splits = plan_splits(full(snap), max_records=10_000, min_partitions=4)
    assert len(splits) >= 4
    assert covered(splits)[("t", 0)][0][0] == 0 and covered(splits)[("t", 0)][-1][1] == 400


def test_filters_prune_input_partitions() -> None:
    snaps = [snapshot(p, [100] * 10) for p in range(4)]
    everything = plan_splits(full(*snaps), max_records=100)
    assert len(everything) == 40
    bounds, _ = push_filters([EqualTo(("partition",), 2)])
    one_partition = plan_splits(full(*snaps), bounds, max_records=100)
    assert len(one_partition) == 10 and {s.partition for s in one_partition} == {2}
    bounds, _ = push_filters(
        [
            EqualTo(("partition",), 2),
            GreaterThanOrEqual(("offset",), 250),
            LessThan(("offset",), 420),
        ]
    )
    offset_range = plan_splits(full(*snaps), bounds, max_records=100)
    assert [(s.start, s.end) for s in offset_range] == [(250, 300), (300, 400), (400, 420)]
    # segment i holds timestamps T0 + i*1000 ... + 999: two segments per partition qualify
    bounds, _ = push_filters(
        [
            GreaterThanOrEqual(("timestamp",), us(T0 + 3000)),
            LessThan(("timestamp",), us(T0 + 5000)),
        ]
    )
    by_time = plan_splits(full(*snaps), bounds, max_records=100)
    assert len(by_time) == 8
    assert {(s.start, s.end) for s in by_time} == {(300, 400), (400, 500)}
    bounds, _ = push_filters([EqualTo(("topic",), "other")])
    assert plan_splits(full(*snaps), bounds) == []


def test_timestamp_pruning_leaves_holes_inside_a_split() -> None:
    snap = snapshot(0, [10] * 5)
    bounds = ScanBounds(timestamps_us=(T0 * 1000, (T0 + 999) * 1000))
    (split,) = plan_splits(full(snap), bounds)
    assert [r.base_offset for r in split.segments] == [0]
    # keep segments 0 and 2 only (the one in between falls outside the time range)
    segs = list(snap.segments)
    segs[1] = Segment(10, 19, "p1", 0, num_records=10, min_timestamp_ms=1, max_timestamp_ms=2)
    gap = PartitionSnapshot("t", "x", 0, 0, 30, tuple(segs[:3]))
    bounds = ScanBounds(timestamps_us=(T0 * 1000, (T0 + 2999) * 1000))
    (split,) = plan_splits(full(gap), bounds)
    assert (split.start, split.end) == (0, 30)
    assert [r.base_offset for r in split.segments] == [0, 20]


def test_compacted_segments_are_estimated_by_their_records() -> None:
    sparse = Segment(0, 9999, "p", 0, num_records=100, min_timestamp_ms=T0, max_timestamp_ms=T0)
    dense = Segment(
        10_000, 10_099, "q", 0, num_records=100, min_timestamp_ms=T0, max_timestamp_ms=T0
    )
    snap = PartitionSnapshot("t", "x", 0, 0, 10_100, (sparse, dense))
    (split,) = plan_splits(full(snap), max_records=200)
    assert split.estimated_records == 200 and len(split.segments) == 2


def test_splits_are_small_and_picklable() -> None:
    (split,) = plan_splits(full(snapshot(3, [10, 10])))
    copy = pickle.loads(pickle.dumps(split))
    assert copy == split and isinstance(copy, ReadSplit)
    assert len(pickle.dumps(split)) < 1000


# -- rate limits ---------------------------------------------------------------


def test_rate_limit_is_proportional_to_backlog() -> None:
    backlog = {TP("t", 0): 900, TP("t", 1): 100, TP("t", 2): 0}
    grant = rate_limit(backlog, 100)
    assert sum(grant.values()) == 100
    assert grant[TP("t", 2)] == 0
    assert 88 <= grant[TP("t", 0)] <= 91 and 9 <= grant[TP("t", 1)] <= 12
    assert rate_limit(backlog, 5000) == backlog  # everything fits


def test_rate_limit_never_starves_a_small_partition() -> None:
    grant = rate_limit({TP("t", 0): 1_000_000, TP("t", 1): 1}, 10)
    assert grant == {TP("t", 0): 9, TP("t", 1): 1}
    tiny = rate_limit({TP("t", p): 5 for p in range(4)}, 2)
    assert sum(tiny.values()) == 2 and all(v <= 1 for v in tiny.values())


@pytest.mark.parametrize("limit", [1, 7, 99, 1000])
def test_rate_limit_bounds(limit: int) -> None:
    backlog = {TP("a", 0): 3, TP("a", 1): 500, TP("b", 0): 77, TP("b", 1): 0}
    grant = rate_limit(backlog, limit)
    assert sum(grant.values()) == min(limit, sum(backlog.values()))
    assert all(0 <= grant[k] <= backlog[k] for k in backlog)


def test_offsets_json_round_trip_in_a_stable_order() -> None:
    offsets = {TP("b", 10): 5, TP("a", 2): 7, TP("b", 2): 1}
    data = offsets_to_json(offsets)
    assert list(data) == ["a", "b"] and list(data["b"]) == ["2", "10"]
    assert offsets_from_json(data) == offsets
    with pytest.raises(ValueError):
        offsets_from_json([1])
