"""The doctor's pure rules on hand-made facts (no storage involved)."""

from __future__ import annotations

from lakelog.doctor.checks import (
    RegistryEntry,
    SegmentFacts,
    StoredFile,
    check_log_versions,
    check_offsets_records,
    check_orphans,
    check_partition_offsets,
    check_registry,
    check_segment,
    check_staging,
    check_unreferenced_tables,
    check_watermark_txns,
)
from lakelog.doctor.findings import RecordToDrop, Severity
from lakelog.groups.codec import CommittedOffset, OffsetKey, encode_key, encode_value
from lakelog.offset_index import Segment


def seg(base: int, last: int, partition: int = 0, records: int | None = None) -> Segment:
    return Segment(
        base_offset=base,
        last_offset=last,
        path=f"partition={partition}/{base:020d}-{last:020d}-x.parquet",
        partition=partition,
        size_bytes=100,
        num_records=records if records is not None else last - base + 1,
        min_timestamp_ms=0,
        max_timestamp_ms=0,
        modification_time=0,
    )


def test_log_versions_must_be_contiguous_from_the_checkpoint() -> None:
    assert check_log_versions("t", "log", [0, 1, 2], None) == []
    assert check_log_versions("t", "log", [6, 7], 5) == []
    [gap] = check_log_versions("t", "log", [0, 1, 3, 5], None)
    assert gap.severity is Severity.ERROR and "2, 4" in gap.message
    [late] = check_log_versions("t", "log", [8], 5)
    assert "checkpoint 5" in late.message and "6, 7" in late.message
    [empty] = check_log_versions("t", "log", [], None)
    assert "no commits" in empty.message


def test_segment_facts_must_match_the_tags() -> None:
    s = seg(10, 19)
    assert check_segment("t", "tbl", s, SegmentFacts(10, 10, 19)) == []
    # Compacted: fewer rows, inside the covered range, as the tags say.
    assert check_segment("t", "tbl", seg(10, 19, records=3), SegmentFacts(3, 12, 18)) == []
    [rows] = check_segment("t", "tbl", s, SegmentFacts(9, 10, 18))
    assert "9 rows" in rows.message and "partition 0" in rows.message and "tbl/" in rows.path
    [outside] = check_segment("t", "tbl", s, SegmentFacts(10, 15, 24))
    assert "15..24" in outside.message and "10..19" in outside.message
    [schema] = check_segment("t", "tbl", s, SegmentFacts(10, 10, 19, ("headers",)))
    assert "headers" in schema.message
    [broken] = check_segment("t", "tbl", s, SegmentFacts(None, None, None, error="is missing"))
    assert broken.message.endswith("is missing") and not broken.repairable


def test_offsets_dense_up_to_the_watermark() -> None:
    assert check_partition_offsets("t", 0, [seg(5, 9), seg(0, 4)], 10) == []
    assert check_partition_offsets("t", 0, [], 7) == []  # retention removed everything
    [gap] = check_partition_offsets("t", 0, [seg(0, 4), seg(6, 9)], 10)
    assert "gap" in gap.message
    [overlap] = check_partition_offsets("t", 0, [seg(0, 4), seg(4, 9)], 10)
    assert "overlap" in overlap.message
    [short] = check_partition_offsets("t", 0, [seg(0, 4)], 10)
    assert "high watermark is 10" in short.message
    [no_txn] = check_partition_offsets("t", 0, [seg(0, 4)], None)
    assert "no high-watermark" in no_txn.message


def test_watermark_transactions_belong_to_existing_partitions() -> None:
    assert check_watermark_txns("t", 2, {0: 5, 1: 0}) == []
    [extra] = check_watermark_txns("t", 2, {0: 5, 3: 1})
    assert "partition 3" in extra.message and "2 partitions" in extra.message


def test_only_old_orphans_and_leftovers_are_repairable() -> None:
    files = [StoredFile("tbl/a", 10.0), StoredFile("tbl/b", 100.0), StoredFile("tbl/live", 1e9)]
    findings = check_orphans("t", files, {"tbl/live"}, grace_s=50)
    assert [(f.path, f.repairable) for f in findings] == [("tbl/a", False), ("tbl/b", True)]
    assert "grace period" in findings[0].message
    staging = check_staging([StoredFile("_staging/w1", 5), StoredFile("_staging/w2", 500)], 60)
    assert [(f.repairable, f.tree) for f in staging] == [(False, True), (True, True)]
    tables = check_unreferenced_tables(
        [StoredFile("topics/a/1", 500), StoredFile("topics/a/2", 500)], {"topics/a/2"}, 60
    )
    assert [f.delete for f in tables] == [("topics/a/1",)]


def test_removed_files_wait_for_vacuum_until_the_grace_period_ends() -> None:
    files = [StoredFile("tbl/replaced", 10.0), StoredFile("tbl/long-replaced", 100.0)]
    removed = {"tbl/replaced", "tbl/long-replaced"}
    findings = check_orphans("t", files, set(), grace_s=50, removed=removed)
    assert [(f.path, f.repairable) for f in findings] == [("tbl/long-replaced", True)]


def test_offsets_table_records_that_do_not_decode_are_marked_to_drop() -> None:
    segment = seg(10, 15, partition=3)
    good_key = encode_key(OffsetKey("g1", "orders", 0))
    records = [
        (10, good_key, encode_value(CommittedOffset(4, "", 1))),
        (11, good_key, None),  # a tombstone
        (12, b"g1", b"x"),
        (13, b"g1", None),
        (14, good_key, b"not json"),
        (15, None, b"{}"),
    ]
    findings = check_offsets_records("__consumer_offsets", "_consumer_offsets", segment, records)
    assert [f.drop for f in findings] == [
        RecordToDrop("_consumer_offsets", segment.path, 3, offset) for offset in (12, 13, 14, 15)
    ]
    assert all(f.severity is Severity.ERROR and f.repairable for f in findings)
    assert all(f.path == f"_consumer_offsets/{segment.path}" for f in findings)
    assert "partition 3 offset 12" in findings[0].message
    assert "not an offsets-table key" in findings[0].message
    assert "not an offsets-table value" in findings[2].message
    assert "no key" in findings[3].message
    assert findings[0].to_json()["offset"] == 12 and findings[0].to_json()["partition"] == 3


def test_stale_and_unreadable_broker_entries() -> None:
    entries = [
        RegistryEntry("_meta/brokers/a.json", 1_000),
        RegistryEntry("_meta/brokers/b.json", 10_000_000),
        RegistryEntry("_meta/brokers/c.json", None),
    ]
    found = check_registry(entries, stale_ms=60_000)
    assert [f.path for f in found] == ["_meta/brokers/b.json", "_meta/brokers/c.json"]
    assert all(f.repairable and f.severity is Severity.WARNING for f in found)
