"""Spark SQL over a typed topic's fields against ``from_json`` over a binary topic's bytes.

One broker subprocess over a temporary local root, two topics of the same N
orders produced over Kafka by confluent-kafka (1,000-record batches): ``typed``
validates Avro values (``confluent.value.schema.validation``), so each segment
carries ``value_fields``; ``json`` holds the same orders as JSON text in
``value``. Both are registered as Spark views (``register_topics(...,
snapshot=True)``, Spark's native Parquet scan of the topic's files), and one
aggregate over one field runs on each, alternating, on local Spark:

* typed: ``SELECT sum(value_fields.amount) FROM orders``;
* from_json: ``SELECT sum(from_json(CAST(value AS STRING), 'amount DOUBLE').amount)``,
  what a user writes over a binary topic.

Each figure is the median of the timed runs after one warm-up run of each; the
two sums must agree. The goal: the typed aggregate at least 3x as fast.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.bench_kafka import client_pool
from benchmarks.bench_schemas import framed_orders, produce_framed, register_order_schema
from benchmarks.common import Progress, Report, Result, config_for, load_note, scratch_dir
from benchmarks.servers import start_broker
from lakelog.client import AdminClient

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME = "typed-sql"
DESCRIPTION = (
    "Spark SQL aggregate over one field: a typed Avro topic's value_fields against "
    "from_json over the same orders as JSON bytes"
)

AGGREGATE = "sum of one field, Spark SQL"
TYPED = "typed field (value_fields.amount)"
FROM_JSON = "from_json over the bytes"
PARTITIONS = 4
#: Distinct orders (cycled), built before the clock as a producer's serializer would.
DISTINCT = 4_096
GOAL_SPEEDUP = 3.0
TYPED_SQL = "SELECT sum(value_fields.amount) AS total FROM {view}"
JSON_SQL = (
    "SELECT sum(from_json(CAST(value AS STRING), 'amount DOUBLE').amount) AS total FROM {view}"
)


@dataclass(frozen=True)
class TypedSqlBenchConfig:
    records: int
    runs: int = 5


CONFIGS = {
    "tiny": TypedSqlBenchConfig(20_000, 1),
    "small": TypedSqlBenchConfig(2_000_000),
    "large": TypedSqlBenchConfig(5_000_000),
}


def json_orders(framed: list[bytes]) -> list[bytes]:
    """The orders of ``framed`` (Confluent-framed Avro) as compact JSON text."""
    import io

    import fastavro

    from benchmarks.bench_schemas import ORDER_SCHEMA
    from server.schema_registry.framing import HEADER_SIZE

    parsed = fastavro.parse_schema(ORDER_SCHEMA)
    out = []
    for value in framed:
        order = fastavro.schemaless_reader(io.BytesIO(value[HEADER_SIZE:]), parsed, None)
        out.append(json.dumps(order, separators=(",", ":")).encode())
    return out


def timed_sum(spark: SparkSession, sql: str) -> tuple[float, float]:
    """Seconds to run ``sql`` (one row, one sum) to the driver, and the sum."""
    start = time.perf_counter()
    (row,) = spark.sql(sql).collect()
    return time.perf_counter() - start, float(row["total"])


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``typed-sql`` suite at a named size (tiny, small, large)."""
    import spark_connector
    from compaction.spark_session import spark_session

    cfg = config_for(CONFIGS, size)
    logging.getLogger("lakelog").setLevel(logging.WARNING)
    report = Report(NAME)
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {TYPED: [], FROM_JSON: []}
    sums: dict[str, float] = {}
    with scratch_dir(workdir, "typed-sql") as scratch, client_pool(1) as pool:
        root = scratch / "root"
        server = start_broker(root, scratch)
        try:
            assert server.kafka is not None
            with AdminClient(server.url) as admin:
                admin.create_topic(
                    "orders-typed",
                    PARTITIONS,
                    configs={"confluent.value.schema.validation": "true"},
                )
                admin.create_topic("orders-json", PARTITIONS)
            framed = framed_orders(register_order_schema(root, "orders-typed-value"), DISTINCT)
            for topic, values in (("orders-typed", framed), ("orders-json", json_orders(framed))):
                progress(f"producing {cfg.records:,} orders to {topic}")
                got = pool.submit(produce_framed, server.kafka, topic, cfg.records, values)
                figures = got.result()
                if figures.errors:
                    raise RuntimeError(f"produce to {topic} failed: {'; '.join(figures.errors)}")
        finally:
            server.stop()
        spark = spark_session(app_name="lakelog-typed-sql")
        views = spark_connector.register_topics(
            spark, str(root), ["orders-typed", "orders-json"], prefix="bench_", snapshot=True
        )
        queries = {
            TYPED: TYPED_SQL.format(view=views["orders-typed"]),
            FROM_JSON: JSON_SQL.format(view=views["orders-json"]),
        }
        for label, sql in queries.items():
            progress(f"warm-up: {label}")
            timed_sum(spark, sql)
        for run_ in range(cfg.runs):
            for label, sql in queries.items():
                progress(f"run {run_ + 1}: {label}")
                seconds, total = timed_sum(spark, sql)
                times[label].append(seconds)
                sums[label] = total
    if abs(sums[TYPED] - sums[FROM_JSON]) > 1e-6 * max(1.0, abs(sums[FROM_JSON])):
        raise RuntimeError(f"the two aggregates disagree: {sums}")
    typed, from_json = statistics.median(times[TYPED]), statistics.median(times[FROM_JSON])
    report.add(
        Result(
            AGGREGATE,
            TYPED,
            "query time",
            typed,
            "s",
            {FROM_JSON: from_json},
            higher_is_better=False,
            params={"records": cfg.records, "partitions": PARTITIONS, "runs": cfg.runs},
        )
    )
    speedup = from_json / typed if typed > 0 else float("inf")
    verdict = "met" if speedup >= GOAL_SPEEDUP else "BELOW goal"
    report.notes += [
        f"{AGGREGATE} over {cfg.records:,} orders: typed {typed:.3f} s, from_json "
        f"{from_json:.3f} s: {speedup:.1f}x as fast ({verdict} >= {GOAL_SPEEDUP:.0f}x)",
        f"each figure: the median of {cfg.runs} runs after a warm-up, the two queries "
        "alternating on one local SparkSession, views of register_topics(snapshot=True)",
        load_note(load_before, os.getloadavg()[0]),
    ]
    return report
