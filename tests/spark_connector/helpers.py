"""Helpers of the connector tests: reading through the connector and through ``TopicLog``."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakelog.catalog import Catalog
from lakelog.records import ConsumerRecord
from tests.fixtures.roots import RootSpec

#: (topic, partition, offset, timestamp ms, timestamp type, key, value, headers or None)
Row = tuple[str, int, int, int, int, bytes | None, bytes | None, Any]


def root_options(root: RootSpec) -> dict[str, str]:
    """Reader/writer options reaching ``root`` (S3 settings passed as options)."""
    options = {"root": root.url}
    if root.s3 is not None:
        options.update(
            {
                "s3.endpoint": str(root.s3.endpoint_url),
                "s3.accessKeyId": str(root.s3.access_key_id),
                "s3.secretAccessKey": str(root.s3.secret_access_key),
                "s3.region": root.s3.region,
            }
        )
    return options


def read(spark: SparkSession, root: RootSpec, **options: str) -> DataFrame:
    return spark.read.format("lakelog").options(**root_options(root)).options(**options).load()


def rows_of(df: DataFrame) -> list[Row]:
    """Connector rows as comparable tuples (timestamps as epoch ms, no time-zone games)."""
    has_headers = "headers" in df.columns
    selected = df.select(
        "topic",
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("ms"),
        "timestampType",
        "key",
        "value",
        *(["headers"] if has_headers else []),
    )
    out: list[Row] = []
    for r in selected.collect():
        headers = None
        if has_headers and r["headers"] is not None:
            headers = [(h["key"], h["value"]) for h in r["headers"]]
        key = bytes(r["key"]) if r["key"] is not None else None
        value = bytes(r["value"]) if r["value"] is not None else None
        out.append(
            (
                r["topic"],
                r["partition"],
                r["offset"],
                r["ms"],
                r["timestampType"],
                key,
                value,
                headers,
            )
        )
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def as_row(record: ConsumerRecord, with_headers: bool) -> Row:
    headers = [(k, v) for k, v in record.headers] if with_headers and record.headers else None
    return (
        record.topic,
        record.partition,
        record.offset,
        record.timestamp_ms,
        record.timestamp_type,
        record.key,
        record.value,
        headers,
    )


def log_rows(
    catalog: Catalog,
    topic: str,
    with_headers: bool = False,
    partitions: list[int] | None = None,
) -> list[Row]:
    """Every record of a topic as ``TopicLog.read`` returns it (the reference)."""
    log = catalog.topic(topic)
    log.refresh()
    out = []
    for p in partitions if partitions is not None else range(log.num_partitions):
        offset, end = log.log_start_offset(p), log.high_watermark(p)
        while offset < end:
            fetched = log.read(p, offset, max_records=10_000, max_bytes=2**40)
            out += [as_row(r, with_headers) for r in fetched.to_records(topic)]
            offset = fetched.next_offset
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))
