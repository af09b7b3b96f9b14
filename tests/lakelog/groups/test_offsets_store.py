"""The offsets table on local and S3 roots: latest value wins, batching, tombstones, compaction."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

from compaction.cli import run_jobs
from compaction.compact import cleaned_txn, compact_topic
from compaction.defaults import JOBS
from compaction.runner import JobOptions
from lakelog.catalog import Catalog
from lakelog.groups.codec import (
    OFFSETS_TABLE,
    OFFSETS_TOPIC,
    CommittedOffset,
    OffsetKey,
    encode_key,
)
from lakelog.groups.offsets_store import OffsetsStore
from lakelog.internal_topics import issue_writer
from lakelog.records import Record
from lakelog.structs import TopicPartition
from lakelog.topic_log import AppendResult

T = TopicPartition


def offsets(store: OffsetsStore, group: str) -> dict[TopicPartition, int]:
    return {tp: v.offset for tp, v in store.fetch(group).items()}


def test_latest_commit_wins_and_many_groups_share_one_delta_commit(
    make_catalog: Callable[..., Catalog],
) -> None:
    store = OffsetsStore(make_catalog(), num_partitions=5)
    assert store.fetch("g") == {} and store.groups() == set()
    store.commit("g", {T("t", 0): CommittedOffset(3, "a", 1), T("t", 1): CommittedOffset(4, "", 1)})
    table = store.table()
    assert table is not None and table.table_path == OFFSETS_TABLE
    assert table.config.compacted and table.num_partitions == 5
    version = table.version
    result = store.commit_many(
        [
            ("g", {T("t", 0): CommittedOffset(7, "b", 2)}),
            ("h", {T("u", 3): CommittedOffset(1, "", 2)}),
            ("i", {T("t", 0): CommittedOffset(9, "", 2)}),
        ]
    )
    assert result.version == version + 1  # three groups, one Delta commit
    assert store.fetch("g") == {
        T("t", 0): CommittedOffset(7, "b", 2),
        T("t", 1): CommittedOffset(4, "", 1),
    }
    assert offsets(store, "h") == {T("u", 3): 1}
    # Another process (another broker) reads the same answers from storage.
    other = OffsetsStore(make_catalog(), num_partitions=5)
    assert offsets(other, "g") == {T("t", 0): 7, T("t", 1): 4}
    assert other.groups() == {"g", "h", "i"}
    # A commit by the other process is seen by the first on its next fetch.
    other.commit("g", {T("t", 1): CommittedOffset(40, "", 3)})
    assert offsets(store, "g") == {T("t", 0): 7, T("t", 1): 40}


def test_delete_tombstones_a_group(make_catalog: Callable[..., Catalog]) -> None:
    store = OffsetsStore(make_catalog(), num_partitions=3)
    store.commit("g", {T("t", 0): CommittedOffset(3, "", 1), T("t", 1): CommittedOffset(4, "", 1)})
    store.commit("keep", {T("t", 0): CommittedOffset(5, "", 1)})
    assert store.delete_group("g") == 2
    assert store.fetch("g") == {} and store.groups() == {"keep"}
    assert offsets(OffsetsStore(make_catalog(), num_partitions=3), "g") == {}
    assert store.delete_group("g") == 0


def test_records_that_do_not_decode_are_skipped_with_a_warning(
    make_catalog: Callable[..., Catalog], caplog: pytest.LogCaptureFixture
) -> None:
    store = OffsetsStore(make_catalog(), num_partitions=1)
    store.commit("g1", {T("t", 0): CommittedOffset(3, "", 1)})
    table = store.table()
    assert table is not None
    key = encode_key(OffsetKey("g1", "t", 0))
    forged = [Record(b"x", key=b"g1"), Record(None, key=b"g1"), Record(b"[]", key=key)]
    [written] = table.append_prepared([table.prepare(forged, writer=issue_writer(OFFSETS_TOPIC))])
    assert isinstance(written, AppendResult)
    store.commit("g2", {T("t", 1): CommittedOffset(8, "", 2)})
    with caplog.at_level(logging.WARNING, "lakelog.groups.offsets_store"):
        # a value that does not decode is not a tombstone: g1's offset stays
        assert offsets(store, "g1") == {T("t", 0): 3}
        assert store.groups() == {"g1", "g2"}
        assert offsets(OffsetsStore(make_catalog(), num_partitions=1), "g2") == {T("t", 1): 8}
    skipped = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(skipped) == 6  # each bad record, once per store that folded it
    for offset in written.offsets:
        assert any(f"{OFFSETS_TOPIC} partition 0 offset {offset}:" in m for m in skipped)


def test_concurrent_creation_gives_one_table(make_catalog: Callable[..., Catalog]) -> None:
    first, second = OffsetsStore(make_catalog()), OffsetsStore(make_catalog())
    first._create()
    second._create()  # a broker losing the creation race uses the winner's table
    first.commit("g", {T("t", 0): CommittedOffset(1, "", 1)})
    second.commit("g", {T("t", 1): CommittedOffset(2, "", 1)})
    assert offsets(first, "g") == offsets(second, "g") == {T("t", 0): 1, T("t", 1): 2}
    assert make_catalog().list_topics() == [OFFSETS_TOPIC]


def test_same_answers_after_compaction(
    make_catalog: Callable[..., Catalog], spark: SparkSession
) -> None:
    catalog = make_catalog()
    store = OffsetsStore(catalog, num_partitions=2)
    expected: dict[str, dict[TopicPartition, CommittedOffset]] = {}
    for round_ in range(6):  # one segment per commit: plenty of superseded values
        for group in ("g1", "g2", "g3"):
            value = CommittedOffset(round_ * 10, f"r{round_}", 1_000 + round_)
            commit = {T("t", p): value for p in range(3)}
            store.commit(group, commit)
            expected[group] = dict(commit)
    store.delete_group("g3")
    store.commit("g3", {T("t", 1): CommittedOffset(77, "back", 5)})  # after a tombstone
    expected["g3"] = {T("t", 1): CommittedOffset(77, "back", 5)}
    store.commit("g4", {T("t", 0): CommittedOffset(1, "", 6)})
    store.delete_group("g4")
    del expected["g1"][T("t", 2)]
    store.commit("g1", {T("t", 2): None})  # a single deleted offset
    expected["g4"] = {}
    before = {g: store.fetch(g) for g in expected}
    assert before == expected

    table = store.table()
    assert table is not None
    records_before = sum(table.partition_state(p).num_records for p in range(2))
    report = compact_topic(
        catalog, OFFSETS_TOPIC, spark, now_ms=int(time.time() * 1000), force=True
    )
    assert report.status == "ok", report.message
    table.refresh()
    records_after = sum(table.partition_state(p).num_records for p in range(2))
    assert records_after < records_before

    # A reader that never saw the log before compaction, and the old reader, agree.
    fresh = OffsetsStore(make_catalog(), num_partitions=2)
    assert {g: fresh.fetch(g) for g in expected} == expected
    assert {g: store.fetch(g) for g in expected} == expected
    assert fresh.groups() == {"g1", "g2", "g3"}


def test_maintenance_runs_include_the_offsets_table(
    make_catalog: Callable[..., Catalog], spark: SparkSession
) -> None:
    """``lakelog maintain`` over the whole root compacts the offsets table like any topic."""
    catalog = make_catalog()
    store = OffsetsStore(catalog, num_partitions=1)
    for n in range(5):
        store.commit("g", {T("t", 0): CommittedOffset(n, "", n)})
    table = store.table()
    assert table is not None
    segments_before = len(table.segments(0))
    status = run_jobs(
        catalog,
        JOBS,
        None,
        lambda: spark,
        JobOptions(force=True),
        history=False,
        progress=False,
    )
    assert status == 0
    table.refresh()
    assert len(table.segments(0)) < segments_before
    assert table.txn_version(cleaned_txn(0)) is not None  # the compact job cleaned it
    assert offsets(OffsetsStore(make_catalog(), num_partitions=1), "g") == {T("t", 0): 4}
