"""Group commit of many requests and idempotent-producer deduplication."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from lakelog import Catalog, Record
from lakelog.errors import InvalidRequestError, LakelogError, OutOfOrderSequenceError
from lakelog.offset_index import Segment
from lakelog.segments import SegmentReader
from lakelog.topic_log import AppendResult


def _records(n: int, tag: str) -> list[Record]:
    return [Record(f"{tag}-{i}".encode(), key=f"k{i}".encode()) for i in range(n)]


def test_many_requests_share_one_commit(catalog: Catalog) -> None:
    catalog.create_topic("t", 3)
    log = catalog.topic("t")
    batches = [log.prepare(_records(4, f"r{j}")) for j in range(5)]
    version = log.version
    results = log.append_prepared(batches)
    assert log.version == version + 1
    offsets: dict[int, list[int]] = {}
    for result in results:
        assert isinstance(result, AppendResult)
        assert result.version == version + 1
        for p, o in zip(result.partitions, result.offsets, strict=True):
            offsets.setdefault(p, []).append(o)
    for p, got in offsets.items():
        assert sorted(got) == list(range(log.high_watermark(p)))


def test_retry_returns_original_offsets_on_any_client(
    make_catalog: Callable[..., Catalog],
) -> None:
    first, second = make_catalog(), make_catalog()
    first.create_topic("t", 3)
    records = _records(6, "a")
    original = first.topic("t").append(records, producer_id=42, base_sequence=0)
    assert not original.duplicate
    # The "ack was lost" retry reaches another broker.
    retried = second.topic("t").append(records, producer_id=42, base_sequence=0)
    assert retried.duplicate
    assert (retried.partitions, retried.offsets) == (original.partitions, original.offsets)
    hwms = [second.topic("t").high_watermark(p) for p in range(3)]
    assert sum(hwms) == 6
    follow = second.topic("t").append(_records(2, "b"), producer_id=42, base_sequence=6)
    assert not follow.duplicate


def test_sequence_gap_is_refused(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    log.append(_records(3, "a"), producer_id=7, base_sequence=0)
    with pytest.raises(OutOfOrderSequenceError, match="next expected is 3"):
        log.append(_records(1, "b"), producer_id=7, base_sequence=5)
    assert log.high_watermark(0) == 3


def test_a_gap_in_a_stale_view_is_checked_on_the_latest_state(
    make_catalog: Callable[..., Catalog],
) -> None:
    """A writer that last read the table before another one committed the producer's
    previous batch sees a gap that storage does not have: the next batch is appended."""
    first, second = make_catalog(), make_catalog()
    first.create_topic("t", 1)
    first.topic("t").append(_records(3, "a"), producer_id=9, base_sequence=0)
    stale = second.topic("t")  # reads the table now: sequences 0..2
    first.topic("t").append(_records(2, "b"), producer_id=9, base_sequence=3)
    assert stale.high_watermark(0) == 3, "the premise: this view predates sequences 3..4"
    follow = stale.append(_records(1, "c"), producer_id=9, base_sequence=5)
    assert not follow.duplicate
    assert list(follow.offsets) == [5]
    with pytest.raises(OutOfOrderSequenceError, match="next expected is 6"):
        stale.append(_records(1, "d"), producer_id=9, base_sequence=9)
    assert stale.high_watermark(0) == 6


def test_duplicate_inside_one_group_commit(catalog: Catalog) -> None:
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    records = _records(3, "a")
    batches = [
        log.prepare(records, producer_id=9, base_sequence=0),
        log.prepare(records, producer_id=9, base_sequence=0),
        log.prepare(_records(2, "other")),
        log.prepare(_records(1, "skip"), producer_id=9, base_sequence=10),
    ]
    first, again, other, skipped = log.append_prepared(batches)
    assert isinstance(first, AppendResult) and isinstance(again, AppendResult)
    assert again.duplicate and again.offsets == first.offsets
    assert isinstance(other, AppendResult)
    assert isinstance(skipped, LakelogError) and skipped.code == 45
    assert sum(log.high_watermark(p) for p in range(2)) == 5


@pytest.mark.parametrize(("pid", "seq"), [(1, None), (None, 1), (-1, 0), (1, -2), (1, 2**31)])
def test_bad_producer_fields(catalog: Catalog, pid: int | None, seq: int | None) -> None:
    catalog.create_topic("t", 1)
    with pytest.raises(InvalidRequestError):
        catalog.topic("t").append(_records(1, "x"), producer_id=pid, base_sequence=seq)


def test_append_once_per_app_version(make_catalog: Callable[..., Catalog]) -> None:
    first, second = make_catalog(), make_catalog()
    first.create_topic("t", 1)
    done = first.topic("t").append_once(_records(3, "b0"), "query-1", 0)
    assert done.offsets == [0, 1, 2] and not done.duplicate
    again = second.topic("t").append_once(_records(3, "b0"), "query-1", 0)
    assert again.duplicate and again.offsets == []
    later = second.topic("t").append_once(_records(2, "b1"), "query-1", 1)
    assert later.offsets == [3, 4]
    assert second.topic("t").txn_version("query-1") == 1


def _count_segment_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every segment path ``SegmentReader.read`` reads from now on, in order."""
    reads: list[str] = []
    original = SegmentReader.read

    def counted(self: SegmentReader, segment: Segment, *args: Any, **kwargs: Any) -> pa.Table:
        reads.append(segment.path)
        return original(self, segment, *args, **kwargs)

    monkeypatch.setattr(SegmentReader, "read", counted)
    return reads


def test_a_retry_reads_only_the_segments_of_its_commit(
    make_catalog: Callable[..., Catalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry's answer is searched newest first and the search stops once found.

    On an object store each segment read is a round trip on the topic's
    commit path, and a dead broker's requests all come back as retries at
    once: the answer may read only the segments that hold the records.
    """
    writer, other = make_catalog(), make_catalog()
    writer.create_topic("t", 3)
    log = writer.topic("t")
    sent = []
    for i in range(30):
        records = _records(6, f"r{i}")  # keys k0..k5: every commit touches all 3 partitions
        sent.append((records, log.append(records, producer_id=42, base_sequence=6 * i)))
    reads = _count_segment_reads(monkeypatch)
    last_records, last = sent[-1]
    retried = other.topic("t").append(last_records, producer_id=42, base_sequence=6 * 29)
    assert retried.duplicate
    assert (retried.partitions, retried.offsets) == (last.partitions, last.offsets)
    assert len(reads) == len(set(last.partitions)), reads
    stats = other.topic("t").commit_stats
    assert (stats.duplicates_from_log, stats.duplicate_segment_reads) == (1, len(reads))
    reads.clear()
    older_records, older = sent[-4]
    retried = other.topic("t").append(older_records, producer_id=42, base_sequence=6 * 26)
    assert (retried.partitions, retried.offsets) == (older.partitions, older.offsets)
    assert len(reads) <= 4 * 3, reads


def test_a_group_commit_answers_a_retry_it_does_not_remember_from_the_log(
    make_catalog: Callable[..., Catalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry that reaches another writer, in one group commit with new records, gets its
    first offsets from the log; the new records are written."""
    writer, other = make_catalog(), make_catalog()
    writer.create_topic("t", 3)
    records = _records(6, "r")
    original = writer.topic("t").append(records, producer_id=7, base_sequence=0)
    log = other.topic("t")
    reads = _count_segment_reads(monkeypatch)
    retry = log.prepare(records, producer_id=7, base_sequence=0)
    fresh = log.prepare(_records(2, "new"), producer_id=8, base_sequence=0)
    answer, written = log.appender.commit_staged(log.appender.stage([retry, fresh]))
    assert isinstance(written, AppendResult) and not written.duplicate
    assert isinstance(answer, AppendResult) and answer.duplicate
    assert (answer.partitions, answer.offsets) == (original.partitions, original.offsets)
    assert reads


def test_the_writer_answers_a_retry_without_reading(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process that wrote a producer's last batches answers their retries from memory."""
    catalog.create_topic("t", 3)
    log = catalog.topic("t")
    sent = [
        (records, log.append(records, producer_id=5, base_sequence=4 * i))
        for i, records in enumerate(_records(4, f"b{i}") for i in range(8))
    ]
    reads = _count_segment_reads(monkeypatch)
    for i in range(3, 8):  # the last five batches
        records, original = sent[i]
        retried = log.append(records, producer_id=5, base_sequence=4 * i)
        assert retried.duplicate
        assert (retried.partitions, retried.offsets) == (original.partitions, original.offsets)
    assert reads == []
    assert (log.commit_stats.duplicates_from_memory, log.commit_stats.duplicates_from_log) == (5, 0)
    records, original = sent[0]  # older than the last five: found in the log
    retried = log.append(records, producer_id=5, base_sequence=0)
    assert (retried.partitions, retried.offsets) == (original.partitions, original.offsets)
    assert reads
