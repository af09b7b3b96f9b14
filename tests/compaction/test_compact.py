"""Key compaction on real Spark (local mode) over a local root and the S3-protocol server."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from compaction.compact import compact_topic
from lakelog import Catalog, Record
from lakelog.errors import InvalidConfigError, UnknownTopicOrPartitionError
from tests.fixtures.roots import RootSpec
from tests.fixtures.snapshots import RootSnapshots, changes

DAY = 86_400_000


def _all(
    catalog: Catalog, topic: str, partition: int = 0
) -> list[tuple[int, bytes | None, bytes | None]]:
    log = catalog.topic(topic)
    log.refresh()
    fetched = log.read(
        partition, log.log_start_offset(partition), max_records=10**6, max_bytes=2**40
    )
    return [(r.offset, r.key, r.value) for r in fetched.to_records(topic)]


def test_email_addresses_keep_latest_per_user(catalog: Catalog, spark: SparkSession) -> None:
    """Kafka's example: many address updates per user id; compaction keeps the latest."""
    catalog.create_topic(
        "emails", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
    )
    log = catalog.topic("emails")
    updates = [
        (b"123", b"bill@microsoft.com"),
        (b"456", b"ann@example.org"),
        (b"123", b"william@gmail.com"),
        (b"789", b"zoe@example.net"),
        (b"123", b"bill@gatesfoundation.org"),
        (b"456", b"ann@new.example.org"),
    ]
    for key, value in updates:
        log.append([Record(value, key=key)])
    log.append([Record(b"head", key=b"999")])  # the active segment stays untouched
    before = _all(catalog, "emails")
    report = compact_topic(catalog, "emails", spark)
    assert report.status == "ok", report.message
    after = _all(catalog, "emails")
    assert after == [
        (3, b"789", b"zoe@example.net"),
        (4, b"123", b"bill@gatesfoundation.org"),
        (5, b"456", b"ann@new.example.org"),
        (6, b"999", b"head"),
    ]
    assert {o for o, _, _ in after} <= {o for o, _, _ in before}  # offsets never change
    assert log.log_start_offset(0) == 0 and log.high_watermark(0) == 7
    assert report.records_in == 6 and report.records_out == 3
    # Reading from 0 lands on the first surviving record: a full snapshot of the latest values.
    assert log.read(0, 0, max_records=1).records.column("offset").to_pylist() == [3]


def test_tombstones_delete_keys_then_disappear(catalog: Catalog, spark: SparkSession) -> None:
    catalog.create_topic(
        "t",
        1,
        {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": str(DAY),
        },
    )
    log = catalog.topic("t")
    log.append([Record(b"v1", key=b"a"), Record(b"v1", key=b"b")])
    log.append([Record(None, key=b"a")])
    log.append([Record(b"head", key=b"c")])
    compact_topic(catalog, "t", spark, force=True)
    assert [(k, v) for _, k, v in _all(catalog, "t")] == [
        (b"b", b"v1"),
        (b"a", None),
        (b"c", b"head"),
    ]
    later = compact_topic(catalog, "t", spark, force=True, now_ms=2**41 + 2 * DAY)
    assert later.tombstones_dropped == 1
    assert [(k, v) for _, k, v in _all(catalog, "t")] == [(b"b", b"v1"), (b"c", b"head")]


def test_bad_input(root: RootSpec, catalog: Catalog, spark: SparkSession) -> None:
    """A refused compaction names the problem and leaves every stored file as it was."""
    catalog.create_topic("plain", 1)
    log = catalog.topic("plain")
    for i in range(3):  # rewritable if it were compacted: one key, many values, three segments
        log.append([Record(b"v%d-%d" % (i, j), key=b"k") for j in range(4)])
    snapshots = RootSnapshots(root)
    before = snapshots.take()
    with pytest.raises(InvalidConfigError, match=r"cleanup\.policy=delete"):
        compact_topic(catalog, "plain", spark, force=True)
    after = snapshots.take()
    assert after == before, changes(before, after)
    with pytest.raises(UnknownTopicOrPartitionError, match="missing"):
        compact_topic(catalog, "missing", spark, force=True)
    after = snapshots.take()
    assert after == before, changes(before, after)
