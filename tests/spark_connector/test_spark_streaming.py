"""Structured Streaming through the connector, against real broker processes and Spark."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

import spark_connector
from lakelog.catalog import Catalog
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.spark_connector.helpers import log_rows, root_options


def produce(broker: BrokerProcess, topic: str, records: list[dict[str, str]]) -> None:
    response = httpx.post(
        f"{broker.url}/v1/topics/{topic}/records", json={"records": records}, timeout=30
    )
    response.raise_for_status()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def read_rows(query: StreamingQuery) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


def test_stream_survives_a_restart_exactly_once(
    connector: SparkSession,
    root: RootSpec,
    catalog: Catalog,
    start_broker: Callable[..., BrokerProcess],
    tmp_path: Path,
) -> None:
    catalog.create_topic("events", 2)
    broker = start_broker(root)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produced = threading.Event()

    def producer() -> None:
        for i in range(25):
            produce(broker, "events", [{"key": f"k{j}", "value": f"{i}-{j}"} for j in range(8)])
            time.sleep(0.15)
        produced.set()

    def start(available_now: bool) -> StreamingQuery:
        writer = (
            connector.readStream.format("lakelog")
            .options(**root_options(root))
            .option("subscribe", "events")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "60")
            .load()
            .select("partition", "offset", "key", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
        )
        if available_now:
            return writer.trigger(availableNow=True).start()
        return writer.trigger(processingTime="1 second").start()

    thread = threading.Thread(target=producer, daemon=True)
    thread.start()
    first = start(available_now=False)
    try:
        wait_for(lambda: read_rows(first) > 0, 120, "the first micro-batches")
    finally:
        first.stop()  # mid-stream: the producer is still going
    first_rows = read_rows(first)
    thread.join(60)
    assert produced.is_set()
    second = start(available_now=True)  # restart from the checkpoint, up to what is there now
    second.awaitTermination(180)
    assert second.exception() is None
    # maxOffsetsPerTrigger applies under AvailableNow too: the rest came in several batches
    assert all(p["numInputRows"] <= 60 for p in second.recentProgress)
    expected = log_rows(catalog, "events")
    assert len(expected) == 200 and 0 < first_rows < 200
    sink = connector.read.parquet(str(out)).collect()
    got = sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in sink)
    assert got == [(r[1], r[2], r[5], r[6]) for r in expected]  # every record, exactly once


def test_word_count_quickstart(
    connector: SparkSession,
    root: RootSpec,
    catalog: Catalog,
    start_broker: Callable[..., BrokerProcess],
    tmp_path: Path,
) -> None:
    """Kafka's quickstart WordCount: lines in, per-word counts out, as a streaming job.

    The output topic is a changelog: the latest record of a word holds its count.
    """
    catalog.create_topic("streams-plaintext-input", 1)
    catalog.create_topic("streams-wordcount-output", 2)
    broker = start_broker(root)
    checkpoint = tmp_path / "wordcount-checkpoint"
    batches = [
        ["all streams lead to kafka", "hello kafka streams"],
        ["join kafka summit", "all streams lead to lakelog"],
    ]

    def run() -> None:
        lines = (
            connector.readStream.format("lakelog")
            .options(**root_options(root))
            .option("subscribe", "streams-plaintext-input")
            .option("startingOffsets", "earliest")
            .load()
        )
        words = lines.select(
            F.explode(F.split(F.lower(spark_connector.value_as_string("value")), r"\W+")).alias(
                "word"
            )
        ).where(F.col("word") != "")
        counts = words.groupBy("word").count()
        query = (
            counts.select(F.col("word").alias("key"), F.col("count").cast("string").alias("value"))
            .writeStream.format("lakelog")
            .options(**root_options(root))
            .option("topic", "streams-wordcount-output")
            .option("checkpointLocation", str(checkpoint))
            .outputMode("complete")  # Spark's Python sinks offer append and complete
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None

    expected: Counter[str] = Counter()
    for lines in batches:
        produce(broker, "streams-plaintext-input", [{"value": line} for line in lines])
        for line in lines:
            expected.update(w for w in re.split(r"\W+", line.lower()) if w)
        run()  # the same query restarted from its checkpoint each time
    written = len(log_rows(catalog, "streams-wordcount-output"))
    run()  # nothing new: nothing written
    assert len(log_rows(catalog, "streams-wordcount-output")) == written

    latest: dict[str, int] = {}
    for partition in (0, 1):  # read back with the native fetch API, in offset order
        response = httpx.get(
            f"{broker.url}/v1/topics/streams-wordcount-output/partitions/{partition}/records",
            params={"offset": "earliest", "max_records": 10_000},
            timeout=30,
        )
        response.raise_for_status()
        for record in response.json()["records"]:
            latest[record["key"]] = int(record["value"])
    assert latest == dict(expected)
    assert latest["kafka"] == 3 and latest["streams"] == 3
