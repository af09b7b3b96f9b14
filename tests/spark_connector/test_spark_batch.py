"""Batch reads and writes, SQL and plain-Parquet access, on a real SparkSession (local mode)."""

from __future__ import annotations

import json
import time

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import spark_connector
from compaction.compact import compact_topic
from compaction.retention import apply_retention
from lakelog.catalog import Catalog
from lakelog.delete_records import delete_records
from lakelog.groups.codec import OFFSETS_TOPIC
from lakelog.groups.offsets_store import OffsetsStore
from lakelog.records import Record
from tests.fixtures.roots import RootSpec
from tests.fixtures.snapshots import RootSnapshots, changes
from tests.spark_connector.helpers import log_rows, read, root_options, rows_of

DAY = 86_400_000


def test_read_equals_topic_log_after_compaction_and_retention(
    connector: SparkSession, root: RootSpec, catalog: Catalog
) -> None:
    catalog.create_topic(
        "users",
        2,
        {
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.01",
            "retention.ms": str(DAY),
        },
    )
    log = catalog.topic("users")
    now = int(time.time() * 1000)
    log.append(  # old enough for retention to remove
        [Record(b"ancient", key=b"u%d" % i, timestamp_ms=now - 9 * DAY) for i in range(6)]
    )
    for round_no in range(4):
        keys = 5 if round_no < 3 else 2  # the last round updates only u0 and u1
        log.append(
            [
                Record(
                    b"%d-%d" % (round_no, i),
                    key=b"u%d" % (i % keys),
                    headers=[("round", b"%d" % round_no)] if i % 2 else [],
                    timestamp_ms=now,
                )
                for i in range(12)
            ]
        )
    log.append([Record(b"head", key=b"u9", timestamp_ms=now)])
    assert apply_retention(catalog, "users", now_ms=now).status == "ok"
    assert compact_topic(catalog, "users", connector, force=True).status == "ok"
    expected = log_rows(catalog, "users", with_headers=True)
    for p in (0, 1):
        assert log.log_start_offset(p) > 0  # retention removed the ancient segment
    gaps = [
        p
        for p in (0, 1)
        if (offsets := [r[2] for r in expected if r[1] == p])
        and len(offsets) < offsets[-1] - offsets[0] + 1
    ]
    assert gaps  # compaction left holes inside the offset range
    df = read(connector, root, subscribe="users", includeHeaders="true")
    assert rows_of(df) == expected


def test_deleted_records_are_gone_from_spark_reads(
    connector: SparkSession, root: RootSpec, catalog: Catalog
) -> None:
    """DeleteRecords' new log start holds for Spark as for Kafka consumers, even inside a
    segment: ``earliest`` is the new start, and an older starting offset is data loss."""
    catalog.create_topic("purged", 1)
    log = catalog.topic("purged")
    log.append([Record(b"a%d" % i) for i in range(5)])
    log.append([Record(b"b%d" % i) for i in range(5)])
    delete_records(log, {0: 7})
    assert [r.offset for r in read(connector, root, subscribe="purged").collect()] == [7, 8, 9]
    assert spark_connector.register_topics(connector, root.url, ["purged"]) == {"purged": "purged"}
    assert [r.offset for r in connector.sql("SELECT offset FROM purged").collect()] == [7, 8, 9]
    with pytest.raises(Exception, match="no longer in the log"):
        read(connector, root, subscribe="purged", startingOffsets='{"purged": {"0": 2}}').collect()


def test_filters_prune_and_stay_exact(
    connector: SparkSession, root: RootSpec, catalog: Catalog
) -> None:
    catalog.create_topic("t", 3)
    log = catalog.topic("t")
    base = 1_700_000_000_000
    for i in range(8):  # one segment per partition per append; batch i at base + i seconds
        log.append([Record(b"%d" % i, partition=p, timestamp_ms=base + 1000 * i) for p in range(3)])
    df = read(connector, root, subscribe="t", maxRecordsPerPartition="2")
    assert df.rdd.getNumPartitions() == 12  # 3 partitions x 8 one-record segments, 2 per split
    picked = df.filter("partition = 1 AND offset >= 3 AND offset < 6")
    assert picked.rdd.getNumPartitions() == 2
    assert [(r.partition, r.offset) for r in picked.collect()] == [(1, 3), (1, 4), (1, 5)]
    late = df.filter(F.col("timestamp") >= F.timestamp_millis(F.lit(base + 6500)))
    assert late.rdd.getNumPartitions() < 12
    assert sorted((r.partition, r.offset) for r in late.collect()) == [
        (p, 7) for p in range(3)
    ]  # Spark re-checks the timestamp filter row by row


def test_sql_views_and_helpers(connector: SparkSession, root: RootSpec, catalog: Catalog) -> None:
    catalog.create_topic("orders", 2)
    catalog.create_topic("orders.eu-2", 1)
    orders = [(f"i{i % 3}", i) for i in range(9)]
    catalog.topic("orders").append(
        [Record(json.dumps({"item": k, "qty": q}).encode(), key=k.encode()) for k, q in orders]
    )
    catalog.topic("orders.eu-2").append([Record(b"hello", key=b"k")])
    views = spark_connector.register_topics(connector, root.url)
    assert views == {"orders": "orders", "orders.eu-2": "orders_eu_2"}
    spark_connector.register(connector)  # idempotent
    counts = connector.sql(
        "SELECT CAST(key AS STRING) AS k, count(*) AS n FROM orders GROUP BY key ORDER BY k"
    ).collect()
    assert [(r.k, r.n) for r in counts] == [("i0", 3), ("i1", 3), ("i2", 3)]
    eu = connector.table("orders_eu_2").select(spark_connector.value_as_string().alias("v"))
    assert [r.v for r in eu.collect()] == ["hello"]
    parsed = connector.table("orders").select(
        spark_connector.parse_json_value("value", "item string, qty int").alias("o")
    )
    assert sorted(r.o.qty for r in parsed.collect()) == list(range(9))
    # a view reads the topic afresh at every query
    catalog.topic("orders").append([Record(b"{}", key=b"i9")])
    assert connector.sql("SELECT count(*) AS n FROM orders").collect()[0].n == 10


def test_errors_reach_the_user_through_spark(
    connector: SparkSession, root: RootSpec, catalog: Catalog
) -> None:
    """Refused reads and failed writes name the problem and change no stored file."""
    catalog.create_topic("t", 1)
    catalog.topic("t").append([Record(b"kept", key=b"k")])
    snapshots = RootSnapshots(root)
    before = snapshots.take()

    def unchanged() -> None:
        after = snapshots.take()
        assert after == before, changes(before, after)

    with pytest.raises(Exception) as info:
        read(connector, root, subscribe="t", assign='{"t": [0]}').collect()
    assert "options 'subscribe' and 'assign' were both given" in str(info.value)
    with pytest.raises(Exception) as info:
        read(connector, root, subscribe="nope").collect()
    assert "option 'subscribe': topic 'nope' does not exist" in str(info.value)
    unchanged()
    # Refused on the driver before any task runs: a column of the wrong type.
    df = connector.createDataFrame([("k", 1)], "key string, value int")
    with pytest.raises(Exception) as info:
        df.write.format("lakelog").options(**root_options(root)).option("topic", "t").mode(
            "append"
        ).save()
    assert "column 'value' must be string or binary, but it is int" in str(info.value)
    unchanged()
    # Failed at commit, after every task staged its rows: one row names a missing topic.
    # Nothing reaches "t" either (all topics are checked before the first commit), and
    # the staged files are gone.
    rows = [(f"k{i}", f"v{i}", "nope" if i >= 9 else "t") for i in range(12)]
    df = connector.createDataFrame(rows, "key string, value string, topic string")
    with pytest.raises(Exception) as info:
        df.write.format("lakelog").options(**root_options(root)).mode("append").save()
    assert "topic 'nope' does not exist" in str(info.value)
    unchanged()
    # Failed in a task: a partition number out of range of the int32 column.
    big = connector.createDataFrame([("v", 2**40)], "value string, partition long")
    with pytest.raises(Exception) as info:
        big.write.format("lakelog").options(**root_options(root)).option("topic", "t").mode(
            "append"
        ).save()
    assert "column 'partition' has a value out of range" in str(info.value)
    unchanged()
    # The internal offsets table takes no client writes (Kafka's INVALID_TOPIC_EXCEPTION).
    OffsetsStore(catalog, num_partitions=1).table(create=True)
    forged = connector.createDataFrame([("g1", "x")], "key string, value string")
    with pytest.raises(Exception) as info:
        forged.write.format("lakelog").options(**root_options(root)).option(
            "topic", OFFSETS_TOPIC
        ).mode("append").save()
    assert "INVALID_TOPIC_EXCEPTION" in str(info.value)
    assert "cannot append to internal topic __consumer_offsets" in str(info.value)
    offsets_table = catalog.topic(OFFSETS_TOPIC)
    offsets_table.refresh()
    assert offsets_table.version == 0


def test_batch_write_then_read_back(
    connector: SparkSession, root: RootSpec, catalog: Catalog
) -> None:
    catalog.create_topic("a", 2)
    catalog.create_topic("b", 1)
    rows = [(f"k{i}", f"v{i}", "a" if i % 3 else "b") for i in range(30)]
    df = connector.createDataFrame(rows, "key string, value string, topic string").repartition(3)
    df.write.format("lakelog").options(**root_options(root)).mode("append").save()
    a, b = log_rows(catalog, "a"), log_rows(catalog, "b")
    assert sorted(r[6] or b"" for r in a + b) == sorted(v.encode() for _, v, _ in rows)
    assert {r[6] for r in b} == {f"v{i}".encode() for i in range(0, 30, 3)}
    for topic, got in (("a", a), ("b", b)):  # dense offsets from 0, one commit per topic
        for p in {r[1] for r in got}:
            assert [r[2] for r in got if r[1] == p] == list(range(sum(r[1] == p for r in got)))
        assert catalog.topic(topic).version == 1
    # keyed records land where a Kafka producer would put them (murmur2)
    from lakelog.partitioner import partition_for_key

    assert all(r[5] is not None and r[1] == partition_for_key(r[5], 2) for r in a)
    # a DataFrame read from a topic writes to another as is (extra columns are ignored)
    catalog.create_topic("copy", 2)
    read(connector, root, subscribe="a").write.format("lakelog").options(
        **root_options(root)
    ).option("topic", "copy").mode("append").save()
    copied = log_rows(catalog, "copy")
    assert sorted((r[1], r[5], r[6]) for r in copied) == sorted((r[1], r[5], r[6]) for r in a)
    assert list(root.open().walk_files("_staging")) == []


@pytest.mark.parametrize("make_root", ["s3"], indirect=True)
def test_s3_root_through_options(connector: SparkSession, root: RootSpec, catalog: Catalog) -> None:
    catalog.create_topic("t", 2)
    df = connector.createDataFrame(
        [(f"k{i}", f"v{i}", i % 2) for i in range(20)], "key string, value string, partition int"
    )
    df.write.format("lakelog").options(**root_options(root)).option("topic", "t").mode(
        "append"
    ).save()
    assert rows_of(read(connector, root, subscribe="t")) == log_rows(catalog, "t")
    assert len(log_rows(catalog, "t")) == 20


def test_plain_parquet_read_of_the_delta_files_gives_the_same_rows(
    connector: SparkSession, root: RootSpec, catalog: Catalog
) -> None:
    catalog.create_topic("t", 3)
    log = catalog.topic("t")
    for i in range(3):
        log.append([Record(b"v%d-%d" % (i, j), key=b"k%d" % j) for j in range(20)])
    table_uri = catalog.describe_topic("t").table_uri
    files = DeltaTable(table_uri).file_uris()
    plain = connector.read.option("basePath", table_uri).parquet(*files)
    via_parquet = sorted(
        (r.partition, r.offset, r.ms, bytes(r.key), bytes(r.value))
        for r in plain.select(
            "partition", "offset", F.unix_millis("timestamp").alias("ms"), "key", "value"
        ).collect()
    )
    via_connector = [
        (r[1], r[2], r[3], r[5], r[6]) for r in rows_of(read(connector, root, subscribe="t"))
    ]
    assert via_parquet == via_connector and len(via_parquet) == 60
