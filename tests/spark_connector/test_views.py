"""``register_topics`` on a real SparkSession: which topics become views, and one
registration of the data source per session."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import spark_connector
from lakelog.catalog import Catalog
from lakelog.groups.codec import OFFSETS_TOPIC, CommittedOffset
from lakelog.groups.offsets_store import OffsetsStore
from lakelog.records import Record
from lakelog.structs import TopicPartition
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.integration  # Spark local mode


def registration_id(spark: SparkSession) -> int:
    """The identity of the JVM object format ``lakelog`` resolves to in this session:
    a new registration replaces the object, and Spark logs a warning each time."""
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    source = manager.lookupDataSource(spark_connector.FORMAT)
    jvm = spark._jvm
    assert jvm is not None
    return int(jvm.java.lang.System.identityHashCode(source))


def offsets_root(catalog: Catalog) -> None:
    """Three topics, a topic named with Kafka's reserved prefix, and ``__consumer_offsets``
    holding a real commit of a group's offsets."""
    for name in ("orders", "payments", "refunds", "__transaction_state"):
        catalog.create_topic(name, 1)
        catalog.topic(name).append([Record(b"v", key=b"k")])
    store = OffsetsStore(catalog, num_partitions=1)
    store.table(create=True)
    now = 1_700_000_000_000
    store.commit("g1", {TopicPartition("orders", 0): CommittedOffset(1, "", now)}, now)


def test_the_data_source_is_registered_once_per_session(
    connector: SparkSession, root: RootSpec, catalog: Catalog
) -> None:
    offsets_root(catalog)
    first = registration_id(connector)
    views = spark_connector.register_topics(connector, root.url, ["orders", "payments", "refunds"])
    assert len(views) == 3
    spark_connector.register(connector)
    spark_connector.register_topics(connector, root.url, ["orders"], prefix="again_")
    assert registration_id(connector) == first
    assert connector.sql("SELECT count(*) AS n FROM refunds").collect()[0].n == 1
    assert connector.sql("SELECT count(*) AS n FROM again_orders").collect()[0].n == 1


def test_internal_topics_are_views_only_when_asked_for(
    connector: SparkSession, root: RootSpec, catalog: Catalog
) -> None:
    offsets_root(catalog)
    assert spark_connector.register_topics(connector, root.url) == {
        "orders": "orders",
        "payments": "payments",
        "refunds": "refunds",
    }
    assert not connector.catalog.tableExists("__consumer_offsets")
    everything = spark_connector.register_topics(
        connector, root.url, prefix="all_", include_internal=True
    )
    assert everything[OFFSETS_TOPIC] == "all___consumer_offsets"
    assert everything["__transaction_state"] == "all___transaction_state"
    assert len(everything) == 5
    groups = connector.sql("SELECT count(*) AS n FROM all___consumer_offsets").collect()
    assert groups[0].n >= 1
    # Named, an internal topic is registered: it was asked for.
    named = spark_connector.register_topics(connector, root.url, [OFFSETS_TOPIC], prefix="x")
    assert named == {OFFSETS_TOPIC: "x__consumer_offsets"}
