"""Retention and vacuum over a local root and the S3-protocol server (no Spark needed)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from compaction.retention import apply_retention
from compaction.vacuum import vacuum_topic
from lakelog import Catalog, Record
from lakelog.errors import OffsetOutOfRangeError
from tests.compaction.helpers import HOUR, MINUTE, T0, exists, read_all, snapshot


def _segment(ts: int, n: int, tag: str) -> list[Record]:
    return [
        Record(f"{tag}-{i:03d}".encode(), key=f"k{i}".encode(), timestamp_ms=ts) for i in range(n)
    ]


def test_retention_by_time_and_size_then_vacuum(make_catalog: Callable[..., Catalog]) -> None:
    catalog = make_catalog()
    catalog.create_topic("events", 1, {"retention.ms": str(HOUR)})
    log = catalog.topic("events")
    # Five segments of 10 records: two old ones, then three within retention.ms.
    stamps = [T0, T0 + MINUTE, T0 + 2 * HOUR, T0 + 3 * HOUR, T0 + 3 * HOUR]
    for i, ts in enumerate(stamps):
        log.append(_segment(ts, 10, f"s{i}"))
    segments = log.segments(0)
    everything = read_all(log)
    assert len(everything) == 50

    # A reader in another process (another Catalog) has listed the segments already.
    reader_catalog = make_catalog()
    reader = reader_catalog.topic("events")
    assert [s.path for s in reader.segments(0)] == [s.path for s in segments]

    # retention.ms: the two segments whose newest record is older than now - 1 h go, whole.
    now = T0 + 2 * HOUR + 30 * MINUTE
    report = apply_retention(catalog, "events", now_ms=now)
    assert report.status == "ok" and report.segments_removed == 2, report.render()
    assert "retention.ms" in report.message
    assert log.log_start_offset(0) == 20 and log.high_watermark(0) == 50
    with pytest.raises(OffsetOutOfRangeError) as caught:
        log.read(0, 19)
    assert caught.value.details["log_start_offset"] == 20
    assert read_all(log) == everything[20:]
    assert apply_retention(catalog, "events", now_ms=now).status == "skipped"

    # retention.bytes: keep at most the two newest segments' bytes.
    newest_two = sum(s.size_bytes for s in segments[-2:])
    catalog.alter_topic_configs("events", {"retention.bytes": str(newest_two)})
    report = apply_retention(catalog, "events", now_ms=now)
    assert report.segments_removed == 1 and "retention.bytes" in report.message
    assert log.log_start_offset(0) == 30
    assert read_all(log) == everything[30:]

    # The stale reader still reads the removed segments: the files stay until vacuum.
    removed = segments[:3]
    assert all(exists(catalog, "events", s.path) for s in removed)
    stale = reader.read(0, 0, max_records=100).to_records("events")
    assert [(r.offset, r.value) for r in stale] == [(o, v) for _, o, _, v, _ in everything]

    # Vacuum within the grace period deletes nothing; with grace 0 the removed files go.
    assert vacuum_topic(catalog, "events").segments_removed == 0
    assert all(exists(catalog, "events", s.path) for s in removed)
    before = snapshot(catalog, "events").live
    report = vacuum_topic(catalog, "events", grace_ms=0)
    assert report.segments_removed == 3, report.render()
    assert not any(exists(catalog, "events", s.path) for s in removed)
    assert all(exists(catalog, "events", p) for p in before)

    # The stale reader now finds its files gone: it refreshes by itself and gets the
    # Kafka answer for its offset (out of range), never a missing-file error ...
    with pytest.raises(OffsetOutOfRangeError):
        reader.read(0, 0)
    # ... and reading from the new log start works.
    assert read_all(reader) == everything[30:]
    assert reader.log_start_offset(0) == 30
