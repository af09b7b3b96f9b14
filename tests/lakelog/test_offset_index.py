"""Property tests of lakelog.offset_index against a plain list-of-ranges model.

A generated history of one table (several partitions) is a sequence of
operations, each of which becomes the actions of part of one Delta commit:

* produce: a new segment continuing the partition's offsets;
* retain: retention removes a prefix of the live segments;
* compact: a segment is replaced by one covering the same range with fewer records;
* merge: a run of consecutive segments is replaced by one covering their union;
* readd: an add for a path that is already live (Delta: the new add replaces it);
* stale remove: a remove of a path that is no longer (or never was) live.

The operations are grouped into commits at random and fed to ``OffsetIndex.apply``.
After each commit the index must agree with the model; at the end it must also agree
with an index built from scratch from the final file set (here: ``TableState.files``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.delta.actions import Action, AddFile, RemoveFile
from lakelog.delta.state import TableState
from lakelog.offset_index import (
    TAG_BASE,
    TAG_LAST,
    OffsetIndex,
    PartitionIndex,
    Segment,
    _stats_millis,
    segment_from_add,
)
from lakelog.segments import add_action

PARTITIONS = (0, 1, 2)
# ``lakelog.offset_index.stats_timestamp`` goes through a float number of seconds and loses a
# millisecond beyond ~2**33 s (year 2242); stay well inside the exact range.
MAX_TIMESTAMP_MS = 2**41

SegmentKey = tuple[object, ...]


def key(segment: Segment) -> SegmentKey:
    """Every field of a segment (``Segment.__eq__`` compares the range only)."""
    return dataclasses.astuple(segment)


def keys(segments: list[Segment]) -> list[SegmentKey]:
    return [key(s) for s in segments]


def strip_tags(add: AddFile) -> AddFile:
    """The same add as written by a tool that knows nothing of lakelog's tags."""
    return dataclasses.replace(add, tags={})


@dataclass
class LogModel:
    """The live segments of each partition as a plain list in offset order."""

    next_offset: dict[int, int]
    live: dict[int, list[Segment]] = field(default_factory=dict)
    gone: list[str] = field(default_factory=list)
    counter: int = 0

    def new_path(self, partition: int, base: int, last: int) -> str:
        self.counter += 1
        return f"partition={partition}/{base:020d}-{last:020d}-{self.counter:06d}.parquet"

    def snapshot(self) -> dict[int, list[Segment]]:
        return {p: list(self.live.get(p, [])) for p in PARTITIONS}


timestamps = st.integers(min_value=0, max_value=MAX_TIMESTAMP_MS)


def publish(data: st.DataObject, segment: Segment, data_change: bool = True) -> AddFile:
    """The add for a segment, sometimes in the tag-less (stats only) form."""
    add = add_action(segment, data_change=data_change)
    return strip_tags(add) if data.draw(st.booleans(), label="stats only") else add


def retire(data: st.DataObject, segment: Segment) -> RemoveFile:
    """A remove for a segment, with or without the extended file metadata."""
    if data.draw(st.booleans(), label="extended remove"):
        return add_action(segment).remove(deletion_timestamp=segment.modification_time + 1)
    return RemoveFile(path=segment.path, deletion_timestamp=0)


def produce(data: st.DataObject, model: LogModel, partition: int) -> list[Action]:
    base = model.next_offset[partition]
    count = data.draw(st.integers(min_value=1, max_value=40), label="offsets")
    last = base + count - 1
    min_ts = data.draw(timestamps, label="min ts")
    max_ts = data.draw(st.integers(min_value=min_ts, max_value=MAX_TIMESTAMP_MS), label="max ts")
    segment = Segment(
        base_offset=base,
        last_offset=last,
        path=model.new_path(partition, base, last),
        partition=partition,
        size_bytes=data.draw(st.integers(min_value=0, max_value=10**9), label="size"),
        num_records=count,
        min_timestamp_ms=min_ts,
        max_timestamp_ms=max_ts,
        modification_time=data.draw(st.integers(min_value=0, max_value=2**42), label="mtime"),
    )
    model.live.setdefault(partition, []).append(segment)
    model.next_offset[partition] = last + 1
    return [publish(data, segment)]


def retain(data: st.DataObject, model: LogModel, partition: int) -> list[Action]:
    live = model.live[partition]
    k = data.draw(st.integers(min_value=1, max_value=len(live)), label="retained prefix")
    removed, model.live[partition] = live[:k], live[k:]
    model.gone.extend(s.path for s in removed)
    return [retire(data, s) for s in removed]


def compact(data: st.DataObject, model: LogModel, partition: int) -> list[Action]:
    live = model.live[partition]
    i = data.draw(st.integers(min_value=0, max_value=len(live) - 1), label="compacted")
    old = live[i]
    new = dataclasses.replace(
        old,
        path=model.new_path(partition, old.base_offset, old.last_offset),
        num_records=data.draw(st.integers(0, old.num_records), label="kept records"),
        size_bytes=data.draw(st.integers(0, old.size_bytes), label="compacted size"),
    )
    live[i] = new
    model.gone.append(old.path)
    actions: list[Action] = [publish(data, new, data_change=False), retire(data, old)]
    return data.draw(st.permutations(actions), label="order")


def merge(data: st.DataObject, model: LogModel, partition: int) -> list[Action]:
    live = model.live[partition]
    i = data.draw(st.integers(min_value=0, max_value=len(live) - 2), label="merge from")
    j = data.draw(st.integers(min_value=i + 1, max_value=len(live) - 1), label="merge to")
    run = live[i : j + 1]
    base, last = run[0].base_offset, run[-1].last_offset
    merged = Segment(
        base_offset=base,
        last_offset=last,
        path=model.new_path(partition, base, last),
        partition=partition,
        size_bytes=sum(s.size_bytes for s in run),
        num_records=data.draw(st.integers(0, sum(s.num_records for s in run)), label="kept"),
        min_timestamp_ms=min(s.min_timestamp_ms for s in run),
        max_timestamp_ms=max(s.max_timestamp_ms for s in run),
        modification_time=max(s.modification_time for s in run) + 1,
    )
    live[i : j + 1] = [merged]
    model.gone.extend(s.path for s in run)
    actions: list[Action] = [publish(data, merged, data_change=False)]
    actions += [retire(data, s) for s in run]
    return data.draw(st.permutations(actions), label="order")


def readd(data: st.DataObject, model: LogModel, partition: int) -> list[Action]:
    live = model.live[partition]
    i = data.draw(st.integers(min_value=0, max_value=len(live) - 1), label="re-added")
    changed = dataclasses.replace(
        live[i],
        size_bytes=data.draw(st.integers(0, 10**9), label="new size"),
        modification_time=live[i].modification_time + 1,
    )
    same = data.draw(st.booleans(), label="identical re-add")
    segment = live[i] if same else changed
    live[i] = segment
    return [publish(data, segment, data_change=False)]


def stale_remove(data: st.DataObject, model: LogModel, partition: int) -> list[Action]:
    paths = [*model.gone, f"partition={partition}/never-added.parquet"]
    path = data.draw(st.sampled_from(paths), label="stale path")
    return [RemoveFile(path=path, deletion_timestamp=1)]


def run_operation(data: st.DataObject, model: LogModel) -> list[Action]:
    partition = data.draw(st.sampled_from(PARTITIONS), label="partition")
    count = len(model.live.get(partition, []))
    kinds = ["produce", "produce", "stale"]
    if count >= 1:
        kinds += ["retain", "compact", "readd"]
    if count >= 2:
        kinds += ["merge"]
    kind = data.draw(st.sampled_from(kinds), label="operation")
    if kind == "produce":
        return produce(data, model, partition)
    if kind == "retain":
        return retain(data, model, partition)
    if kind == "compact":
        return compact(data, model, partition)
    if kind == "merge":
        return merge(data, model, partition)
    if kind == "readd":
        return readd(data, model, partition)
    return stale_remove(data, model, partition)


def probe_offsets(live: list[Segment], hwm: int) -> set[int]:
    offsets = {-1, 0, hwm - 1, hwm, hwm + 1}
    for s in live:
        middle = (s.base_offset + s.last_offset) // 2
        offsets |= {s.base_offset - 1, s.base_offset, middle, s.last_offset, s.last_offset + 1}
    return offsets


def probe_timestamps(live: list[Segment]) -> set[int]:
    stamps = {-1, 0, MAX_TIMESTAMP_MS + 1}
    for s in live:
        for t in (s.min_timestamp_ms, s.max_timestamp_ms):
            stamps |= {t - 1, t, t + 1}
    return stamps


def check_partition(index: PartitionIndex, live: list[Segment], hwm: int) -> None:
    """Every query of one partition's index against the list-of-ranges model."""
    assert keys(index.segments) == keys(live)
    assert len(index) == len(live)
    assert keys(list(index)) == keys(live)
    assert index.log_start_offset(hwm) == (live[0].base_offset if live else hwm)
    assert index.size_bytes() == sum(s.size_bytes for s in live)
    for offset in probe_offsets(live, hwm):
        expected = [s for s in live if s.last_offset >= offset]
        assert keys(index.segments_from(offset)) == keys(expected), offset
    for t in probe_timestamps(live):
        first = next((i for i, s in enumerate(live) if s.max_timestamp_ms >= t), len(live))
        assert keys(index.segments_for_timestamp(t)) == keys(live[first:]), t


def check_index(index: OffsetIndex, model: dict[int, list[Segment]], hwms: dict[int, int]) -> None:
    for p in PARTITIONS:
        check_partition(index.partition(p), model[p], hwms[p])
        for s in model[p]:
            assert index.contains(s.path)


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_incremental_index_matches_model(data: st.DataObject) -> None:
    starts = {p: data.draw(st.integers(0, 10**12), label=f"start {p}") for p in PARTITIONS}
    model = LogModel(next_offset=dict(starts))
    index = OffsetIndex()
    state = TableState()
    operations = data.draw(st.integers(min_value=1, max_value=30), label="operations")
    pending: list[Action] = []
    for n in range(operations):
        pending += run_operation(data, model)
        last = n == operations - 1
        if last or data.draw(st.booleans(), label="end commit"):
            index.apply(pending)
            state.apply(state.version + 1, pending)
            pending = []
            check_index(index, model.snapshot(), model.next_offset)
            for path in model.gone:
                still_live = any(s.path == path for p in PARTITIONS for s in model.live.get(p, []))
                assert index.contains(path) == still_live

    # The index built from the final file set equals the incrementally kept one,
    # whatever order the adds come in.
    final = list(state.files.values())
    shuffled = data.draw(st.permutations(final), label="final order")
    rebuilt = OffsetIndex.from_adds(shuffled)
    for p in PARTITIONS:
        assert keys(rebuilt.partition(p).segments) == keys(index.partition(p).segments)
    assert {a.path for a in final} == {
        s.path for p in PARTITIONS for s in index.partition(p).segments
    }


segments_lists = st.lists(
    st.tuples(st.integers(1, 50), timestamps, st.integers(0, 10**6), st.booleans()),
    min_size=1,
    max_size=12,
)


def contiguous(
    start: int, specs: list[tuple[int, int, int, bool]], partition: int
) -> list[Segment]:
    result: list[Segment] = []
    base = start
    for n, (count, ts, size, compacted) in enumerate(specs):
        last = base + count - 1
        result.append(
            Segment(
                base_offset=base,
                last_offset=last,
                path=f"partition={partition}/{n:04d}.parquet",
                partition=partition,
                size_bytes=size,
                num_records=count // 2 if compacted else count,
                min_timestamp_ms=ts,
                max_timestamp_ms=ts + count,
            )
        )
        base = last + 1
    return result


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(0, 10**9),
    specs=segments_lists,
    kept=st.integers(0, 12),
    same_commit=st.booleans(),
)
def test_adds_applied_twice_then_removed(
    start: int, specs: list[tuple[int, int, int, bool]], kept: int, same_commit: bool
) -> None:
    segments = contiguous(start, specs, partition=0)
    adds = [add_action(s) for s in segments]
    index = OffsetIndex()
    if same_commit:
        index.apply(adds + adds)
    else:
        index.apply(adds)
        index.apply(adds)
    assert keys(index.partition(0).segments) == keys(segments)
    cut = max(0, len(segments) - kept)
    index.apply([a.remove(deletion_timestamp=1) for a in adds[:cut]])
    live = segments[cut:]
    hwm = segments[-1].end_offset
    check_partition(index.partition(0), live, hwm)
    for s in segments:
        assert index.contains(s.path) == (s.path in {x.path for x in live})
    index.apply([a.remove(deletion_timestamp=2) for a in adds])
    assert index.partition(0).segments == []
    assert index.partition(0).log_start_offset(hwm) == hwm
    assert not any(index.contains(s.path) for s in segments)


def test_readd_moving_a_path_to_another_partition_leaves_no_trace() -> None:
    segment = Segment(0, 9, "x.parquet", partition=0, size_bytes=5, num_records=10)
    moved = dataclasses.replace(segment, partition=1)
    index = OffsetIndex.from_adds([add_action(segment)])
    index.apply([add_action(moved)])
    assert index.partition(0).segments == []
    assert keys(index.partition(1).segments) == [key(moved)]
    index.apply([RemoveFile(path="x.parquet", deletion_timestamp=0)])
    assert index.partition(1).segments == []
    assert not index.contains("x.parquet")


segments = st.builds(
    Segment,
    base_offset=st.integers(0, 2**62),
    last_offset=st.integers(0, 2**62),
    path=st.text(min_size=1, max_size=30),
    partition=st.integers(0, 10**4),
    size_bytes=st.integers(0, 2**40),
    num_records=st.integers(0, 2**31),
    min_timestamp_ms=timestamps,
    max_timestamp_ms=timestamps,
    modification_time=st.integers(0, 2**42),
)


@settings(max_examples=200, deadline=None)
@given(segment=segments)
def test_stats_fallback_gives_the_same_segment(segment: Segment) -> None:
    add = add_action(segment)
    from_tags = segment_from_add(add)
    from_stats = segment_from_add(strip_tags(add))
    assert key(from_tags) == key(segment)
    assert key(from_stats) == key(segment)


@settings(max_examples=200, deadline=None)
@given(ms=st.integers(-(10**12), MAX_TIMESTAMP_MS))
def test_stats_millis_of_iso_strings(ms: int) -> None:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
    assert _stats_millis(text[:-3] + "Z") == ms
    assert _stats_millis(text + "Z") == ms
    assert _stats_millis(text + "+00:00") == ms
    assert _stats_millis(text) == ms  # no zone: UTC, never the host's local time
    assert _stats_millis(ms) == ms


def test_stats_fallback_examples() -> None:
    stats = {
        "numRecords": 3,
        "minValues": {"offset": 100, "timestamp": "2023-11-14T22:13:20.000Z"},
        "maxValues": {"offset": 104, "timestamp": "2023-11-14T22:13:21.001Z"},
        "nullCount": {"offset": 0, "timestamp": 0},
    }
    add = AddFile(
        path="p=7/a.parquet",
        partition_values={"partition": "7"},
        size=123,
        modification_time=9,
        stats=json.dumps(stats),
    )
    segment = segment_from_add(add)
    assert (segment.base_offset, segment.last_offset, segment.end_offset) == (100, 104, 105)
    assert (segment.partition, segment.size_bytes, segment.num_records) == (7, 123, 3)
    assert (segment.min_timestamp_ms, segment.max_timestamp_ms) == (1700000000000, 1700000001001)
    assert segment.modification_time == 9

    # Tags win over stats (a compacted segment's stats may be narrower).
    tagged = dataclasses.replace(add, tags={TAG_BASE: "90", TAG_LAST: "119"})
    assert (segment_from_add(tagged).base_offset, segment_from_add(tagged).last_offset) == (90, 119)

    # Without a timestamp statistic the timestamps are 0; without partition, partition 0.
    bare = AddFile(
        path="b.parquet",
        partition_values={},
        size=1,
        modification_time=0,
        stats=json.dumps({"minValues": {"offset": 5}, "maxValues": {"offset": 6}}),
    )
    assert key(segment_from_add(bare)) == key(Segment(5, 6, "b.parquet", 0, size_bytes=1))


@pytest.mark.parametrize(
    "stats",
    [None, "{}", json.dumps({"minValues": {"offset": 1}}), json.dumps({"maxValues": {"x": 1}})],
)
def test_add_without_tags_or_offset_stats_is_refused(stats: str | None) -> None:
    add = AddFile("c.parquet", {"partition": "0"}, 1, 0, stats=stats)
    with pytest.raises(ValueError, match=r"c\.parquet"):
        segment_from_add(add)
    # Only one tag of the pair is not enough either.
    with pytest.raises(ValueError):
        segment_from_add(dataclasses.replace(add, tags={TAG_BASE: "1"}))


def test_empty_index_queries() -> None:
    index = OffsetIndex()
    partition = index.partition(5)
    assert partition.segments == []
    assert partition.segments_from(0) == []
    assert partition.segments_for_timestamp(0) == []
    assert partition.log_start_offset(42) == 42
    assert partition.size_bytes() == 0
    assert index.partition(5) is partition
    assert not index.contains("anything")
    index.apply([RemoveFile(path="anything", deletion_timestamp=0)])
    assert not index.contains("anything")
