"""Staging a group commit ahead of the one committing (the broker's pipeline).

Segments are written at predicted offsets outside the commit lock; the commit
checks the prediction and rewrites what moved. Whatever the order of commits
and abandons, offsets stay dense and unique and no unreferenced segment stays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog import Catalog, Record
from lakelog.append.result import PartitionBatch, grouped_batches, partition_batches
from lakelog.append.staging import group_by_partition, take_rows
from lakelog.errors import LakelogError
from lakelog.produce import PreparedBatch
from lakelog.produce_batch import ProduceBatch
from lakelog.topic_log import AppendResult, StagedAppend, TopicLog


def _stage(log: TopicLog, tag: str, n: int = 3) -> StagedAppend:
    return log.appender.stage(
        [log.prepare([Record(f"{tag}{i}".encode(), partition=0) for i in range(n)])]
    )


def _offsets(results: Sequence[AppendResult | LakelogError]) -> list[int]:
    (result,) = results
    assert isinstance(result, AppendResult)
    return [int(o) for o in result.offsets]


def _values(log: TopicLog) -> list[bytes]:
    rows = log.read(0, 0, max_records=1_000).records
    assert rows.column("offset").to_pylist() == list(range(rows.num_rows))
    return [bytes(v) for v in rows.column("value").to_pylist()]


def _segment_files(log: TopicLog) -> int:
    return len([f for f in log.storage.list_dir(f"{log.table_path}/partition=0") if not f.is_dir])


def test_stages_committed_in_order_line_up_without_rewriting(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    first, second = _stage(log, "a"), _stage(log, "b")
    assert second.prepared.bases == {0: 3}  # predicted after the first, not yet committed
    assert _offsets(log.appender.commit_staged(first)) == [0, 1, 2]
    assert _offsets(log.appender.commit_staged(second)) == [3, 4, 5]
    assert _values(log) == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2"]
    assert _segment_files(log) == 2


def test_an_abandoned_stage_leaves_no_gap_and_no_file(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    first, second = _stage(log, "a"), _stage(log, "b")
    log.appender.abandon(first)
    assert _offsets(log.appender.commit_staged(second)) == [0, 1, 2]  # rewritten at the real end
    assert _values(log) == [b"b0", b"b1", b"b2"]
    assert _segment_files(log) == 1
    assert _stage(log, "c").prepared.bases == {0: 3}  # promises ended with the stages


def test_stages_committed_out_of_order_are_rewritten_not_overlapped(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    first, second = _stage(log, "a"), _stage(log, "b")
    assert _offsets(log.appender.commit_staged(second)) == [0, 1, 2]
    assert _offsets(log.appender.commit_staged(first)) == [3, 4, 5]
    assert _values(log) == [b"b0", b"b1", b"b2", b"a0", b"a1", b"a2"]
    assert _segment_files(log) == 2


def test_a_stage_is_rewritten_after_another_writers_commit(
    make_catalog: Callable[..., Catalog],
) -> None:
    catalog = make_catalog()
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    staged = _stage(log, "a")
    other = make_catalog().topic("t")  # a second writer on the same table
    other.append([Record(b"x", partition=0)])
    assert _offsets(log.appender.commit_staged(staged)) == [1, 2, 3]
    assert _values(log) == [b"x", b"a0", b"a1", b"a2"]


def test_a_log_closed_while_in_use_keeps_appending(catalog: Catalog) -> None:
    """A catalog closes a log it replaced while a broker may still be appending through it."""
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    staged = _stage(log, "a")
    log.close()
    assert _offsets(log.appender.commit_staged(staged)) == [0, 1, 2]
    log.close()
    both = [Record(b"x", partition=0), Record(b"y", partition=1)]
    assert [int(o) for o in log.append(both).offsets] == [3, 0]


def test_listeners_get_the_rows_as_committed_also_after_a_renumbering(
    make_catalog: Callable[..., Catalog],
) -> None:
    """Each partition's rows are numbered once per base: what the listener is told is what
    the segment holds, also when another writer moved the partition after staging."""
    first = make_catalog()
    first.create_topic("t", 2)
    log = first.topic("t")
    told: list[tuple[int, list[int], list[bytes]]] = []
    log.appender.add_listener(
        lambda p, rows: told.append(
            (p, rows.column("offset").to_pylist(), rows.column("value").to_pylist())
        )
    )
    staged = log.appender.stage(
        [log.prepare([Record(b"a0", partition=0), Record(b"a1", partition=1)])]
    )
    make_catalog().topic("t").append([Record(b"x0", partition=0), Record(b"x1", partition=0)])
    (result,) = log.appender.commit_staged(staged)
    assert isinstance(result, AppendResult)
    assert log.commit_stats.renumbered_segments == 1
    assert sorted(told) == [(0, [2], [b"a0"]), (1, [0], [b"a1"])]
    for partition, offsets, values in told:
        stored = log.read(partition, offsets[0]).records
        assert stored.column("offset").to_pylist()[: len(offsets)] == offsets
        assert stored.column("value").to_pylist()[: len(values)] == values


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=12),
        min_size=1,
        max_size=6,
    )
)
def test_group_by_partition_keeps_request_order_within_each_partition(
    requests: list[list[int]],
) -> None:
    # Requests to one partition and requests spread over partitions, in one commit: every
    # record is found at its reported position, and a partition holds its records in
    # request order, then record order (the order offsets are given in).
    batches = [
        PreparedBatch(
            ProduceBatch.from_columns(
                partition=pa.array(parts, pa.int32()),
                value=[f"{i}:{j}".encode() for j in range(len(parts))],
            ).table
        )
        for i, parts in enumerate(requests)
    ]
    by_partition, locate = group_by_partition(batches)
    expected: dict[int, list[bytes]] = {}
    for i, parts in enumerate(requests):
        for j, p in enumerate(parts):
            expected.setdefault(p, []).append(f"{i}:{j}".encode())
    assert {p: t.column("value").to_pylist() for p, t in by_partition.items()} == expected
    for i, (sent, positions) in enumerate(locate):
        assert sent.tolist() == requests[i]
        for j, (p, at) in enumerate(zip(sent, positions, strict=True)):
            assert by_partition[int(p)].column("value")[int(at)].as_py() == f"{i}:{j}".encode()


HEADER = pa.struct([pa.field("key", pa.string(), nullable=False), ("value", pa.binary())])


@st.composite
def request_tables(draw: st.DrawFn) -> pa.Table:
    """Several requests' rows, concatenated (one chunk each), some chunks sliced: columns
    all null, all empty lists, or mixed, as produce requests have them."""
    chunks = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        n = draw(st.integers(min_value=1, max_value=6))
        cell = st.one_of(st.none(), st.binary(max_size=4))
        header = st.lists(st.tuples(st.text(max_size=2), st.binary(max_size=2)), max_size=2)
        headers = [
            [{"key": k, "value": v} for k, v in h]
            for h in draw(st.lists(header, min_size=n, max_size=n))
        ]
        pad = draw(st.integers(min_value=0, max_value=2))
        table = pa.table(
            {
                "key": pa.array(draw(st.lists(cell, min_size=n, max_size=n)), pa.binary()),
                "value": pa.array([b"v%d" % i for i in range(n)], pa.binary()),
                "headers": pa.array(
                    headers if draw(st.booleans()) else [[] for _ in range(n)], pa.list_(HEADER)
                ),
                "producer_id": pa.nulls(n, pa.int64())
                if draw(st.booleans())
                else pa.array(range(n), pa.int64()),
            }
        )
        chunks.append(pa.concat_tables([table, table.slice(0, pad)]).combine_chunks().slice(0, n))
    return pa.concat_tables(chunks)


@settings(max_examples=100, deadline=None)
@given(request_tables(), st.randoms(use_true_random=False))
def test_take_rows_is_arrows_take(rows: pa.Table, random: Any) -> None:
    # Any part of the rows, in any order: the gather is a take, whatever it is given.
    order = np.arange(rows.num_rows, dtype=np.int64)
    random.shuffle(order)
    order = order[: random.randint(0, len(order))]
    taken = take_rows(rows, order)
    assert taken.equals(rows.take(pa.array(order)).combine_chunks())
    assert all(column.num_chunks == 1 for column in taken.columns)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=9),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.integers(min_value=0, max_value=3), max_size=5),
)
def test_each_request_reports_the_offset_runs_its_records_got(
    tmp_path_factory: pytest.TempPathFactory, requests: list[list[int]], earlier: list[int]
) -> None:
    # Keyed requests spread over partitions and one-partition requests in one group commit,
    # on partitions that already hold records: each request's per-partition batches name
    # exactly its records' lowest offset and count in each partition it touched.
    catalog = Catalog(str(tmp_path_factory.mktemp("runs")))
    catalog.create_topic("t", 5)
    log = catalog.topic("t")
    if earlier:
        log.append([Record(b"e", partition=p) for p in earlier])
    batches = [
        log.prepare([Record(f"{i}:{j}".encode(), partition=p) for j, p in enumerate(parts)])
        for i, parts in enumerate(requests)
    ]
    results = log.append_prepared(batches)
    for i, (parts, result) in enumerate(zip(requests, results, strict=True)):
        assert isinstance(result, AppendResult)
        assert result.partitions == parts
        expected: dict[int, tuple[int, int]] = {}
        for p, offset in zip(result.partitions, result.offsets, strict=True):
            low, n = expected.get(p, (offset, 0))
            expected[p] = (min(low, offset), n + 1)
        assert [(b.partition, b.base_offset, b.count) for b in result.batches] == sorted(
            (p, low, n) for p, (low, n) in expected.items()
        )
        for j, (p, offset) in enumerate(zip(result.partitions, result.offsets, strict=True)):
            (value,) = log.read(p, offset, max_records=1).records.column("value").to_pylist()
            assert value == f"{i}:{j}".encode()
    log.close()


def test_offset_runs_of_sparse_high_partition_ids() -> None:
    # A group touching partitions 3 and 4,000 only: each request's runs are those a sort of
    # its own records gives, counted over the touched partitions alone.
    parts = [
        np.array([4000, 3, 4000], np.int32),
        np.array([3], np.int32),
        np.array([4000, 4000, 3], np.int32),
    ]
    bases = {3: 10, 4000: 500}
    positions = {3: 0, 4000: 0}
    offsets = []
    for request in parts:
        numbered = []
        for p in request.tolist():
            numbered.append(bases[p] + positions[p])
            positions[p] += 1
        offsets.append(np.array(numbered, np.int64))
    assert grouped_batches(parts, bases) == [
        partition_batches(p, o) for p, o in zip(parts, offsets, strict=True)
    ]
    assert grouped_batches(parts, bases)[2] == [
        PartitionBatch(3, 12, 1),
        PartitionBatch(4000, 502, 2),
    ]
