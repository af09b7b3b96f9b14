"""Merging small broker segments on real Spark: same records at the same offsets, fewer files."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from pyspark.sql import SparkSession

from compaction.merge import merge_topic
from lakelog import Catalog, Record
from tests.compaction.helpers import T0, read_all


def _full(catalog: Catalog, topic: str) -> list[tuple[object, ...]]:
    """Every column of every record, for record-for-record comparisons."""
    log = catalog.topic(topic)
    log.refresh()
    out: list[tuple[object, ...]] = []
    for p in range(log.num_partitions):
        got = log.read(p, log.log_start_offset(p), max_records=10**6, max_bytes=2**40)
        out += [
            (p, r.offset, r.timestamp_ms, r.timestamp_type, r.key, r.value, tuple(r.headers))
            for r in got.to_records(topic)
        ]
    return out


def test_twenty_small_appends_merge_into_few_segments(
    make_catalog: Callable[..., Catalog], spark: SparkSession
) -> None:
    catalog = make_catalog()
    catalog.create_topic("clicks", 2)
    log = catalog.topic("clicks")
    for i in range(20):
        log.append(
            [
                Record(
                    None if j == 3 else f"v{i}-{j}".encode(),
                    key=None if j == 0 else f"k{j}".encode(),
                    timestamp_ms=T0 + i * 1000 + j,
                    headers=[("h", f"{i}".encode())] if j == 1 else (),
                    partition=j % 2,
                )
                for j in range(6)
            ]
        )
    before = _full(catalog, "clicks")
    small = log.segments(0)
    assert len(small) == 20 and len(log.segments(1)) == 20
    # Runs of at most ~5 small segments each.
    target = int(sum(s.size_bytes for s in small) / 20 * 5.5)
    catalog.alter_topic_configs("clicks", {"segment.bytes": str(target)})

    # A reader holding the old snapshot keeps working after the merge commits.
    reader = make_catalog().topic("clicks")
    report = merge_topic(catalog, "clicks", spark)
    assert report.status == "ok", report.message
    assert report.records_in == report.records_out == 120
    assert report.segments_removed == 40

    for p in (0, 1):
        merged = log.segments(p)
        assert 2 <= len(merged) <= 6, [s.size_bytes for s in merged]
        assert all(s.size_bytes <= target for s in merged)
        # Contiguous ranges, covering exactly what the small segments covered.
        assert merged[0].base_offset == 0 and merged[-1].last_offset == 59
        assert all(a.end_offset == b.base_offset for a, b in itertools.pairwise(merged))
    assert _full(catalog, "clicks") == before
    assert read_all(reader, refresh=False) == read_all(log)
