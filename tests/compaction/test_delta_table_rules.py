"""Rules set on a topic's Delta table by another Delta writer hold for lakelog's commits.

The topics are produced through lakelog; ``delta.appendOnly`` and a CHECK constraint
are then set with delta-rs, as any Delta writer sets them, and the refused jobs and
appends (lakelog's own and the Spark connector's, on real Spark) leave every stored
file as it was.
"""

from __future__ import annotations

import re

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

import spark_connector
from compaction.compact import compact_topic
from compaction.merge import merge_topic
from compaction.retention import apply_retention
from lakelog import Catalog, Record
from lakelog.delete_records import delete_records
from lakelog.errors import DeltaTableRuleError
from lakelog.segment_rewrite import drop_records
from tests.compaction.helpers import DAY, HOUR, T0, read_all
from tests.fixtures.roots import RootSpec
from tests.fixtures.snapshots import RootSnapshots, changes
from tests.spark_connector.helpers import root_options

pytestmark = pytest.mark.integration  # Spark local mode


def registered(spark: SparkSession) -> SparkSession:
    """The session, with the connector's format for the appends made through Spark."""
    spark_connector.register(spark)
    return spark


def test_an_append_only_topic_takes_appends_and_keeps_its_data(
    root: RootSpec, catalog: Catalog, spark: SparkSession
) -> None:
    connector = registered(spark)
    catalog.create_topic(
        "users",
        1,
        {
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.01",
            "retention.ms": str(HOUR),
        },
    )
    log = catalog.topic("users")
    for i in range(6):
        log.append([Record(f"v{i}".encode(), key=f"u{i % 2}".encode(), timestamp_ms=T0 + i)])
    log.append([Record(b"head", key=b"u9", timestamp_ms=T0 + 10)])
    stored = read_all(log)
    uri = catalog.describe_topic("users").table_uri
    table = DeltaTable(uri, storage_options=catalog.storage.delta_storage_options())
    table.alter.set_table_properties({"delta.appendOnly": "true"})
    snapshots = RootSnapshots(root)
    before = snapshots.take()

    refusal = "append-only (table property delta.appendOnly=true)"
    with pytest.raises(DeltaTableRuleError, match=re.escape(refusal)):
        compact_topic(catalog, "users", connector)
    with pytest.raises(DeltaTableRuleError, match=re.escape(refusal)):
        apply_retention(catalog, "users", now_ms=T0 + DAY)
    first = log.segments(0)[0]
    with pytest.raises(DeltaTableRuleError, match=re.escape(refusal)):
        drop_records(log, {first.path: [first.base_offset]})
    with pytest.raises(DeltaTableRuleError, match=re.escape(refusal)):
        delete_records(log, {0: 3})
    after = snapshots.take()
    assert after == before, changes(before, after)
    assert read_all(log) == stored

    # Merging moves the same rows into fewer files (dataChange=false), as Delta allows.
    assert merge_topic(catalog, "users", connector, now_ms=T0 + DAY).status == "ok"
    assert read_all(log) == stored
    frame = connector.createDataFrame([("u3", "new")], "key string, value string")
    frame.write.format("lakelog").options(**root_options(root)).option("topic", "users").mode(
        "append"
    ).save()
    assert [(k, v) for _, _, k, v, _ in read_all(log)][-1] == (b"u3", b"new")


def test_a_check_constraint_refuses_appends_until_it_is_dropped(
    root: RootSpec, catalog: Catalog, spark: SparkSession
) -> None:
    connector = registered(spark)
    catalog.create_topic("orders", 2)
    log = catalog.topic("orders")
    log.append([Record(b"first", key=b"k", partition=p) for p in (0, 1)])
    uri = catalog.describe_topic("orders").table_uri
    table = DeltaTable(uri, storage_options=catalog.storage.delta_storage_options())
    table.alter.add_constraint({"known_partition": "partition >= 0"})
    snapshots = RootSnapshots(root)
    before = snapshots.take()

    named = "topic 'orders' has the CHECK constraint 'known_partition' (partition >= 0)"
    with pytest.raises(DeltaTableRuleError, match=re.escape(named)) as caught:
        log.append([Record(b"second", key=b"k")])
    assert f"ALTER TABLE delta.`{uri}` DROP CONSTRAINT known_partition" in str(caught.value)
    frame = connector.createDataFrame([("k", "from spark")], "key string, value string")
    writer = frame.write.format("lakelog").options(**root_options(root)).option("topic", "orders")
    with pytest.raises(Exception) as failed:
        writer.mode("append").save()
    assert named in str(failed.value)
    after = snapshots.take()
    assert after == before, changes(before, after)

    # A topic config change keeps the constraint, which still refuses appends.
    catalog.alter_topic_configs("orders", {"retention.ms": str(HOUR)})
    table = DeltaTable(uri, storage_options=catalog.storage.delta_storage_options())
    assert "delta.constraints.known_partition" in table.metadata().configuration
    with pytest.raises(DeltaTableRuleError, match=re.escape(named)):
        log.append([Record(b"second", key=b"k")])

    table.alter.drop_constraint("known_partition")  # as the refusal says, from any Delta writer
    log.append([Record(b"second", key=b"k", partition=0)])
    assert [v for _, _, _, v, _ in read_all(log)] == [b"first", b"second", b"first"]
