"""One workload for any Spark master: the maintenance jobs, a batch read, SQL, a stream.

``fill_root`` writes the same records into any root, so two roots filled
with it hold the same log, offsets included. ``run_workload`` then runs,
through the public entry points only, retention and compaction (compaction's
``run_job``, as ``lakelog maintain`` does), a batch read and a selective
read of ``format("lakelog")`` (and of ``read_topic``, the native scan),
SQL over ``register_topics`` views, and a ``Trigger.AvailableNow`` stream
into a Parquet sink, and returns every result as JSON-ready data. Run once
on a cluster (``tests.cluster.driver``) and once on ``local[2]``, the
results must be equal.
"""

from __future__ import annotations

import base64
import contextlib
import io
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import spark_connector
from compaction.runner import JobOptions, run_job
from lakelog import Catalog, Record
from lakelog.storage import S3Settings

#: A fixed clock (2023-11-14T22:13:20Z) and the instant the jobs run at, two days later.
T0 = 1_700_000_000_000
HOUR = 3_600_000
NOW = T0 + 48 * HOUR
TOPICS = ("users", "clicks")
#: Connector columns in a fixed order; ``timestamp`` as epoch ms (no time-zone games).
COLUMNS = ("topic", "partition", "offset", "ms", "timestampType", "key", "value", "headers")


def fill_root(catalog: Catalog) -> None:
    """A compacted topic with superseded keys and tombstones, and a plain topic past retention.

    ``users``: six appends over ten keys, every segment rolled by ``NOW``
    (segment.ms of a minute); u3's tombstone is older than delete.retention.ms
    at ``NOW`` (dropped), u4's is not (kept). ``clicks``: one segment per
    append and partition, two of four per partition older than retention.ms.
    """
    catalog.create_topic("users", 2, {"cleanup.policy": "compact", "segment.ms": "60000"})
    users = catalog.topic("users")
    for batch in range(6):
        users.append(
            [
                Record(
                    f"v{batch}-{i}".encode(),
                    key=f"u{(batch * 3 + i) % 10}".encode(),
                    timestamp_ms=T0 + batch * 1000 + i,
                    headers=[("batch", str(batch).encode())] if i % 3 == 0 else (),
                )
                for i in range(12)
            ]
        )
    users.append(
        [
            Record(None, key=b"u3", timestamp_ms=T0 + 7000),
            Record(None, key=b"u4", timestamp_ms=NOW - HOUR),
        ]
    )
    catalog.create_topic("clicks", 2, {"retention.ms": str(HOUR)})
    clicks = catalog.topic("clicks")
    for age_minutes in (180, 120, 30, 10):
        clicks.append(
            [
                Record(
                    f"c{age_minutes}-{i}".encode(),
                    partition=i % 2,
                    timestamp_ms=NOW - age_minutes * 60_000 + i,
                )
                for i in range(8)
            ]
        )


def connector_options(url: str, s3: S3Settings | None) -> dict[str, str]:
    """Reader options reaching the root; S3 settings as options, so executors need none."""
    options = {"root": url}
    if s3 is not None:
        options.update(
            {
                "s3.endpoint": str(s3.endpoint_url),
                "s3.accessKeyId": str(s3.access_key_id),
                "s3.secretAccessKey": str(s3.secret_access_key),
                "s3.region": s3.region,
            }
        )
    return options


def plain(value: Any) -> Any:
    """A Spark value as JSON: bytes as base64 text, rows and arrays as lists."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def rows_of(df: DataFrame) -> list[list[Any]]:
    """The rows of a DataFrame as sorted JSON-ready lists (order is not part of a result)."""
    rows = [[plain(v) for v in row] for row in df.collect()]
    return sorted(rows, key=repr)


def record_rows(df: DataFrame) -> list[list[Any]]:
    """Connector rows in ``COLUMNS`` order."""
    headers = F.col("headers") if "headers" in df.columns else F.lit(None)
    return rows_of(
        df.select(
            "topic",
            "partition",
            "offset",
            F.unix_millis("timestamp").alias("ms"),
            "timestampType",
            "key",
            "value",
            headers.alias("headers"),
        )
    )


def run_jobs(catalog: Catalog, spark: SparkSession) -> list[dict[str, Any]]:
    """Retention, then forced compaction, of every topic, as ``lakelog maintain`` runs them."""
    options = JobOptions(force=True, now_ms=NOW)
    reports = []
    for topic in TOPICS:
        for job in ("retention", "compact"):
            outcome = run_job(job, catalog, topic, lambda: spark, options, explicit=False)
            if outcome.error is not None:
                raise outcome.error
            report = outcome.report
            reports.append(
                {
                    "job": report.job,
                    "topic": report.topic,
                    "status": report.status,
                    "message": report.message,
                    "partitions": report.partitions,
                    "records_in": report.records_in,
                    "records_out": report.records_out,
                    "tombstones_dropped": report.tombstones_dropped,
                    "segments_removed": report.segments_removed,
                    "segments_added": report.segments_added,
                }
            )
    return reports


def run_stream(spark: SparkSession, options: dict[str, str], work: Path) -> dict[str, Any]:
    """An AvailableNow query over both topics into Parquet files, in several micro-batches."""
    query = (
        spark.readStream.format("lakelog")
        .options(**options)
        .option("subscribe", ",".join(TOPICS))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", "20")
        .load()
        .writeStream.format("parquet")
        .option("path", str(work / "stream"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    if query.isActive:
        query.stop()
        raise RuntimeError("the AvailableNow query did not finish within 240 s")
    if query.exception() is not None:
        raise RuntimeError(f"the AvailableNow query failed: {query.exception()}")
    batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]
    return {
        "batches": len(batches),
        "rows": record_rows(spark.read.parquet(str(work / "stream"))),
    }


def native_reads(spark: SparkSession, options: dict[str, str]) -> dict[str, Any]:
    """The reads of ``run_workload`` through the connector's native-scan entry points.

    ``read_topic`` and ``register_topics(snapshot=True)`` run on Spark's own
    Parquet scan where Spark can open the root and fall back to the data
    source elsewhere; either way their rows must be the data source's.
    """
    everything = spark_connector.read_topic(
        spark, ",".join(TOPICS), options=options, includeHeaders="true"
    )
    selective = spark_connector.read_topic(
        spark,
        options={**options, "assign": '{"users": [0]}', "startingOffsets": '{"users": {"0": 10}}'},
    ).where(F.col("offset") < 30)
    views = spark_connector.register_topics(
        spark, options["root"], prefix="native_", options=options, snapshot=True
    )
    return {
        "native_scan": "FileScan parquet" in plan_of(everything),
        "native_batch": record_rows(everything),
        "native_selective": record_rows(selective),
        "native_sql_per_partition": rows_of(spark.sql(per_partition_sql(views["users"]))),
    }


def plan_of(df: DataFrame) -> str:
    """The physical plan Spark prints for ``df`` (PySpark returns it only as printed text)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        df.explain()
    return printed.getvalue()


def per_partition_sql(view: str) -> str:
    return (
        "SELECT partition, count(*) AS records, min(offset) AS first, max(offset) AS last, "
        f"count(DISTINCT key) AS keys FROM {view} GROUP BY partition"
    )


def run_workload(
    spark: SparkSession, url: str, s3: S3Settings | None, work: Path
) -> dict[str, Any]:
    """Jobs, then reads of their result; every result as JSON-ready data."""
    work.mkdir(parents=True, exist_ok=True)
    spark_connector.register(spark)
    catalog = Catalog(url, s3=s3)
    try:
        reports = run_jobs(catalog, spark)
    finally:
        catalog.close()
    options = connector_options(url, s3)
    batch = spark.read.format("lakelog").options(**options)
    everything = batch.option("subscribe", ",".join(TOPICS)).option("includeHeaders", "true")
    selective = (
        spark.read.format("lakelog")
        .options(**options)
        .option("assign", '{"users": [0]}')
        .option("startingOffsets", '{"users": {"0": 10}}')
        .load()
        .where(F.col("offset") < 30)
    )
    views = spark_connector.register_topics(spark, url, prefix="cluster_", options=options)
    per_partition = spark.sql(per_partition_sql(views["users"]))
    latest = spark.sql(
        f"SELECT CAST(key AS STRING) AS key, CAST(value AS STRING) AS value, offset "
        f"FROM {views['users']} WHERE value IS NOT NULL"
    )
    clicks = spark.sql(
        f"SELECT partition, count(*) AS records, min(timestamp) AS oldest "
        f"FROM {views['clicks']} GROUP BY partition"
    )
    return {
        "master": spark.sparkContext.master,
        "reports": reports,
        "batch": record_rows(everything.load()),
        "selective": record_rows(selective),
        "sql_per_partition": rows_of(per_partition),
        "sql_latest": rows_of(latest),
        "sql_clicks": rows_of(clicks.select("partition", "records", F.unix_millis("oldest"))),
        "stream": run_stream(spark, options, work),
        **native_reads(spark, options),
    }
