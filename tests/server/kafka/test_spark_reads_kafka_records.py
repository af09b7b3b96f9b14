"""Records produced over the Kafka protocol are the same rows Spark reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import spark_connector
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import Message, kafka_client
from tests.server.kafka.test_produce_consume import create_topic
from tests.spark_connector.helpers import read


def test_spark_reads_what_a_kafka_producer_wrote(
    spark: SparkSession, start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    root = RootSpec(str(tmp_path / "root"))
    broker = start_broker(root)
    assert broker.kafka is not None
    create_topic(broker, "events", partitions=2)
    sent = [
        Message(
            key=b"user-%d" % (i % 4),
            value=None if i == 7 else b"payload-%d" % i,
            headers=(("trace", b"t%d" % i),),
            timestamp_ms=1_700_000_000_000 + i,
        )
        for i in range(20)
    ]
    delivered = kafka_client("confluent").produce(broker.kafka, "events", sent, "zstd")

    spark_connector.register(spark)
    rows = (
        read(spark, root, subscribe="events", includeHeaders="true")
        .select(
            "partition",
            "offset",
            F.unix_millis("timestamp").alias("ms"),
            "key",
            "value",
            F.col("headers").getItem(0).getField("value").alias("trace"),
        )
        .collect()
    )
    by_position = {(r["partition"], r["offset"]): r for r in rows}
    assert len(by_position) == len(sent)
    for message, where in zip(sent, delivered, strict=True):
        row = by_position[(where.partition, where.offset)]
        assert (bytes(row["key"]), row["value"] and bytes(row["value"]), row["ms"]) == (
            message.key,
            message.value,
            message.timestamp_ms,
        )
        assert bytes(row["trace"]) == message.headers[0][1]
